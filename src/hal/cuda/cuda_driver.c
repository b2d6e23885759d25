#include "hal/cuda/cuda_driver.h"

#include "hal/cuda/cuda_device.h"
#include "hal/cuda/cuda_nvrtc.h"
#include "hal/cuda/cuda_symbols.h"

static hrt_status_t hrt_cuda_probe(void) {
  const hrt_cuda_symbols_t* symbols = NULL;
  return hrt_cuda_symbols_load(&symbols);
}

static hrt_status_t hrt_cuda_probe_compiler(hrt_hal_compiler_info_t* out_info) {
  out_info->name = "nvrtc";
  const hrt_nvrtc_t* nvrtc = NULL;
  HRT_RETURN_IF_ERROR(hrt_nvrtc_load(&nvrtc));
  out_info->version_major = nvrtc->version_major;
  out_info->version_minor = nvrtc->version_minor;
  return HRT_OK;
}

static hrt_status_t hrt_cuda_create(const hrt_hal_device_uri_t* uri,
                                    hrt_hal_device_t** out_device) {
  const hrt_cuda_symbols_t* symbols = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_symbols_load(&symbols));
  HRT_RETURN_IF_ERROR(hrt_hal_device_uri_check_params(uri, NULL, 0));
  const uint32_t ordinal = uri->has_ordinal ? uri->ordinal : 0;
  if (ordinal >= (uint32_t)symbols->device_count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "device URI 'cuda://%u': there %s %d CUDA "
                           "device%s (ordinals 0 to %d)",
                           ordinal, symbols->device_count == 1 ? "is" : "are",
                           symbols->device_count,
                           symbols->device_count == 1 ? "" : "s",
                           symbols->device_count - 1);
  }
  return hrt_cuda_device_create(symbols, ordinal, out_device);
}

const hrt_hal_driver_t hrt_cuda_driver = {
    .name = "cuda",
    .probe = hrt_cuda_probe,
    .probe_compiler = hrt_cuda_probe_compiler,
    .create_device = hrt_cuda_create,
};
