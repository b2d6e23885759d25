// The VM instance: the root object of the runtime. It holds the driver
// registry through which devices are created. Any thread may use it;
// reference counted like every runtime object.
#ifndef HRT_VM_INSTANCE_H_
#define HRT_VM_INSTANCE_H_

#include <stdint.h>

#include "base/status.h"
#include "hal/device.h"
#include "hal/driver.h"

typedef struct hrt_vm_instance_s hrt_vm_instance_t;

hrt_status_t hrt_vm_instance_create(hrt_vm_instance_t** out_instance)
    HRT_MUST_USE;
void hrt_vm_instance_retain(hrt_vm_instance_t* instance);
void hrt_vm_instance_release(hrt_vm_instance_t* instance);

// The registered drivers, in `auto` preference order. Borrowed.
const hrt_hal_driver_t* const* hrt_vm_instance_drivers(
    const hrt_vm_instance_t* instance, uint32_t* out_count);

// Creates a device from a URI (see hal/driver.h). The device does not retain
// the instance.
hrt_status_t hrt_vm_instance_create_device(
    hrt_vm_instance_t* instance, const char* uri,
    hrt_hal_device_t** out_device) HRT_MUST_USE;

#endif  // HRT_VM_INSTANCE_H_
