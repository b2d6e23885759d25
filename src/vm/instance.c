#include "vm/instance.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/live.h"
#include "base/ref.h"

struct hrt_vm_instance_s {
  hrt_ref_t ref;
  const hrt_hal_driver_t* const* drivers;
  uint32_t driver_count;
};

hrt_status_t hrt_vm_instance_create(hrt_vm_instance_t** out_instance) {
  hrt_vm_instance_t* instance = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*instance), "instance", (void**)&instance));
  hrt_ref_init(&instance->ref);
  instance->drivers = hrt_hal_builtin_drivers(&instance->driver_count);
  hrt_live_add(HRT_LIVE_INSTANCE, 1);
  *out_instance = instance;
  return HRT_OK;
}

void hrt_vm_instance_retain(hrt_vm_instance_t* instance) {
  if (instance) hrt_ref_retain(&instance->ref);
}

void hrt_vm_instance_release(hrt_vm_instance_t* instance) {
  if (!instance || !hrt_ref_release(&instance->ref)) return;
  free(instance);
  hrt_live_add(HRT_LIVE_INSTANCE, -1);
}

const hrt_hal_driver_t* const* hrt_vm_instance_drivers(
    const hrt_vm_instance_t* instance, uint32_t* out_count) {
  *out_count = instance->driver_count;
  return instance->drivers;
}

hrt_status_t hrt_vm_instance_create_device(hrt_vm_instance_t* instance,
                                           const char* uri,
                                           hrt_hal_device_t** out_device) {
  return hrt_hal_create_device(instance->drivers, instance->driver_count, uri,
                               out_device);
}
