# gputune::nvrtc: NVRTC by its library file, after find_package(CUDAToolkit). Not CUDA::nvrtc:
# that target links the driver stub (libcuda.so) too, and gputune loads the driver at run time
# (dlopen) so that it starts on machines without one. Used by the build and by the installed
# gputuneConfig.cmake alike.
if(NOT TARGET gputune::nvrtc)
  if(NOT CUDA_nvrtc_LIBRARY)
    message(FATAL_ERROR "gputune: NVRTC (libnvrtc) not found in the CUDA toolkit "
                        "(${CUDAToolkit_LIBRARY_DIR}). Fix: install the toolkit's NVRTC, or set "
                        "CUDAToolkit_ROOT.")
  endif()
  add_library(gputune::nvrtc UNKNOWN IMPORTED)
  set_target_properties(gputune::nvrtc PROPERTIES IMPORTED_LOCATION "${CUDA_nvrtc_LIBRARY}")
endif()
