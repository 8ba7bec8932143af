/* The C surface of libagentao, as installed (include/agentao.h). */
#include <agentao.h>
