/* Images from C: a good image is sent and kept in the history; bad ones (NULL data, zero
 * length, unknown MIME type, a 50 MB image, too many, a NULL array) get a status and a
 * message, and nothing is sent. Also the context-window calls: the usage JSON and an
 * on-demand compaction of a short history (skipped). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const uint8_t PNG[] = {0x89, 'P', 'N', 'G', 1, 2, 3};

static void test_bad_images(const char *dir) {
    tu_section("bad images");
    char *config = tu_config(dir, "{\"text\":\"first answer\"},{\"text\":\"streamed answer\"}", NULL);
    agentao_agent *agent = tu_agent(config, NULL);
    char *text = TU_JUNK;

    agentao_image null_data = {"image/png", NULL, 10};
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", &null_data, 1, -1, NULL, &text, &err),
                           AGENTAO_STATUS_NULL_ARGUMENT, "images[0].data");
    CHECK(text == NULL);
    agentao_image empty = {"image/png", PNG, 0};
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", &empty, 1, -1, NULL, &text, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "images[0]: the image is empty");
    agentao_image svg = {"image/svg+xml", PNG, sizeof PNG};
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", &svg, 1, -1, NULL, &text, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "'image/svg+xml' is not accepted");
    agentao_image null_mime = {NULL, PNG, sizeof PNG};
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", &null_mime, 1, -1, NULL, &text, &err),
                           AGENTAO_STATUS_NULL_ARGUMENT, "images[0].mime_type");
    size_t big_len = 50u * 1024u * 1024u;
    uint8_t *big = calloc(1, big_len);
    CHECK(big != NULL);
    agentao_image two[2] = {{"image/png", PNG, sizeof PNG}, {"image/jpeg", big, big_len}};
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", two, 2, -1, NULL, &text, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "images[1]: 52428800 bytes, over the limit");
    free(big);
    agentao_image many[17];
    for (int i = 0; i < 17; i++) many[i] = (agentao_image){"image/png", PNG, sizeof PNG};
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", many, 17, -1, NULL, &text, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "at most 16");
    CHECK_FAILS_CONTAINING(agentao_agent_chat_images(agent, "look", NULL, 1, -1, NULL, &text, &err),
                           AGENTAO_STATUS_NULL_ARGUMENT, "images");
    CHECK_FAILS_CONTAINING(agentao_agent_run_images(agent, "look", &empty, 1, -1, NULL, tu_on_done, NULL, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "the image is empty");
    agentao_stream *stream = TU_JUNK;
    CHECK_FAILS_CONTAINING(agentao_agent_stream_open_images(agent, "look", &svg, 1, -1, NULL, &stream, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "'image/svg+xml' is not accepted");
    CHECK(stream == NULL);

    /* Nothing was sent: the history is empty and the first scripted answer is still there. */
    char *history = tu_history(agent);
    CHECK_STR_EQ(history, "[]");
    free(history);

    agentao_image good = {"image/png", PNG, sizeof PNG};
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_chat_images(agent, "look", &good, 1, -1, NULL, &text, &err),
                 AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "first answer");
    agentao_string_free(text);
    history = tu_history(agent);
    CHECK_CONTAINS(history, "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORwECAw==\"}}");
    free(history);

    /* The pull stream with an image: the deltas, then the outcome; the image is kept. */
    agentao_image jpeg = {"image/jpeg", PNG, sizeof PNG};
    agentao_stream *s = NULL;
    CHECK_STATUS(agentao_agent_stream_open_images(agent, "and this", &jpeg, 1, -1, NULL, &s, &err),
                 AGENTAO_STATUS_OK);
    char *items = strdup("");
    for (int i = 0; s && i < 100; i++) {
        char *item = NULL;
        agentao_status st = agentao_stream_next(s, 10000, &item, NULL);
        if (st != AGENTAO_STATUS_OK) {
            CHECK_STATUS(st, AGENTAO_STATUS_CLOSED);
            break;
        }
        char *joined = tu_printf("%s%s\n", items, item);
        free(items);
        items = joined;
        agentao_string_free(item);
    }
    CHECK_CONTAINS(items, "streamed answer");
    free(items);
    agentao_stream_free(s);
    history = tu_history(agent);
    CHECK_CONTAINS(history, "data:image/jpeg;base64,");
    free(history);

    /* The context figures. */
    char *usage = NULL;
    CHECK_STATUS(agentao_agent_context_usage(agent, &usage, &err), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(usage, "\"window\":200000");
    CHECK_CONTAINS(usage, "\"breaker_open\":false");
    agentao_string_free(usage);
    usage = TU_JUNK;
    CHECK_STATUS(agentao_agent_context_usage(agent, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_context_usage(NULL, &usage, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(usage == NULL);

    /* Two messages: too short to compact. */
    char *result = NULL;
    CHECK_STATUS(agentao_agent_compact(agent, NULL, NULL, &result, &err), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(result, "\"status\":\"skipped\"");
    agentao_string_free(result);

    agentao_agent_free(agent);
    free(config);
}

int main(void) {
    test_bad_images(tu_workspace());
    return tu_finish("test_images");
}
