/* l_nn_ops.c: placeholder registration, filled in by the work on issue 3. */
#include "ms_lua.h"

void ms_lua_open_nn_ops(lua_State *L) { (void)L; }
