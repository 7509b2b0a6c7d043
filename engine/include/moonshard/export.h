/* export.h: MS_API marks the functions of the public headers. The library is built with
 * -fvisibility=hidden, so a function without it stays inside libmoonshard.so (and the Lua module)
 * however it is named: `nm -D` of the library lists exactly what these headers declare
 * (tests/check_exports.sh checks it). Callers see a plain declaration. */
#ifndef MOONSHARD_EXPORT_H
#define MOONSHARD_EXPORT_H

#define MS_API __attribute__((visibility("default")))

#endif
