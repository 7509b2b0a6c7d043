/* l_nn_conv.c: placeholder registration, filled in by the work on issue 3. */
#include "ms_lua.h"

void ms_lua_open_nn_conv(lua_State *L) { (void)L; }
