# Build only the libraries llama-cpp-python loads (libllama, libggml*): no `common` library and no
# cpp-httplib, which only llama.cpp's own tools use. llama-cpp-python's CMakeLists forces
# LLAMA_BUILD_COMMON on before adding llama.cpp, so a -D cannot turn it off; this file runs inside
# llama.cpp's project() (CMAKE_PROJECT_llama.cpp_INCLUDE), after that, and wins. Used by `make` with
# -DLLAVA_BUILD=OFF (no multimodal library; contextmem sends text only).
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
