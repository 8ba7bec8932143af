/* The header's include guard holds: including it twice is harmless. */
#include "agentao.h"
#include "agentao.h"

int header_use(void);
int header_use(void) {
    return (int)AGENTAO_VERSION_NUMBER + AGENTAO_STATUS_NO_ENGINE;
}
