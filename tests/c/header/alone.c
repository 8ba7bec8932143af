/* The header compiles on its own, as the first and only include. */
#include "agentao.h"

int header_use(const agentao_transport *t);
int header_use(const agentao_transport *t) {
    agentao_status st = AGENTAO_STATUS_OK;
    return (int)st + AGENTAO_CONFIRMATION_ALLOW + (int)sizeof *t + (t ? (int)t->struct_size : 0);
}
