# The XRT backend plugin (engine/xrt/) and fpgalz4fs-mkxclbin (kernels/xclbin/), built when libxrt-dev is found.
