/* A panic inside the library is contained at the C boundary (feature `test-panic`). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

int main(void) {
    tu_section("agentao_test_panic");
    for (int i = 0; i < 3; i++) {
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_test_panic(&err), AGENTAO_STATUS_PANIC);
        CHECK(err != NULL);
        CHECK_STATUS(agentao_error_status(err), AGENTAO_STATUS_PANIC);
        CHECK_CONTAINS(agentao_error_message(err), "agentao_test_panic");
        CHECK_CONTAINS(agentao_error_message(err), "panic");
        agentao_error_free(err);
    }
    /* err_out may be NULL. */
    CHECK_STATUS(agentao_test_panic(NULL), AGENTAO_STATUS_PANIC);

    tu_section("the library still works after a contained panic");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"still alive\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    if (a) {
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "hi", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "still alive");
        agentao_string_free(text);
        agentao_agent_free(a);
    }
    free(cfg);
    return tu_finish("test_panic");
}
