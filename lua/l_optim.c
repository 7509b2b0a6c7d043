/* l_optim.c: placeholder registration, filled in by the work on issue 3. */
#include "ms_lua.h"

void ms_lua_open_optim(lua_State *L) { (void)L; }
