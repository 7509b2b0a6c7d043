/* l_io.c: placeholder registration, filled in by the work on issue 3. */
#include "ms_lua.h"

void ms_lua_open_io(lua_State *L) { (void)L; }
