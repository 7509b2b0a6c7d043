/* mistake.c: a library, built with -fvisibility=hidden like libmoonshard, that exports an
 * internal function by mistake: check_exports.sh must refuse it (test exports.catches_mistake). */
#include "mistake.h"

/* Internal: stays hidden, as it should. */
int ms_mistake_helper(int x) { return x + 1; }

/* Internal too, but given default visibility by mistake. */
__attribute__((visibility("default"))) int ms_mistake_leaked(int x) { return ms_mistake_helper(x) * 2; }

int ms_mistake_public(int x) { return ms_mistake_leaked(x); }
