/* mistake.h: the fixture of tests/exports: a public header with one MS_API function. */
#ifndef MOONSHARD_EXPORTS_MISTAKE_H
#define MOONSHARD_EXPORTS_MISTAKE_H

#include "moonshard/export.h"

MS_API int ms_mistake_public(int x);

#endif
