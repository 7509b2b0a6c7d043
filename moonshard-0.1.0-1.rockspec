-- moonshard's LuaRocks package: `luarocks make` in a checkout builds it with CMake and installs
-- moonshard.so and the Lua library (lua/moonshard/**.lua) into the rocks tree, where a stock
-- lua5.4 requires them (docs/install.md). CMake finds Lua 5.4, zlib, MPI and CUDA as in any build.
rockspec_format = "3.0"
package = "moonshard"
version = "0.1.0-1"
source = {
  -- a release tarball, made with: git archive --prefix=moonshard-0.1.0/ -o moonshard-0.1.0.tar.gz HEAD
  -- (`luarocks make` in a checkout does not fetch it)
  url = "moonshard-0.1.0.tar.gz",
  dir = "moonshard-0.1.0",
}
description = {
  summary = "Train neural networks with FSDP from Lua 5.4: a C11 engine, PyTorch's names",
  detailed = [[
moonshard is a C11 engine for training neural networks with fully sharded data parallelism
(FSDP), driven from Lua 5.4: tensors with autograd, nn modules, optimizers, data loading,
checkpoints that round-trip with PyTorch, MPI and NCCL process groups, CPU and CUDA kernels.]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    -- luarocks deploys all of $(PREFIX)/lib as Lua C modules: libmoonshard, its .pc and CMake
    -- files stay in the rock's own folder, under clib/
    CMAKE_INSTALL_LIBDIR = "clib",
    MS_INSTALL_LUADIR = "$(LUADIR)",  -- the Lua library: the tree's share/lua/5.4 once deployed
    MS_INSTALL_CMODDIR = "$(LIBDIR)", -- moonshard.so: the tree's lib/lua/5.4 once deployed
    BUILD_TESTING = "OFF",
  },
}
