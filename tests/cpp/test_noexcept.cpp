// The non-throwing API in a translation unit built with -fno-exceptions and
// AGENTAO_NO_EXCEPTIONS: every call returns agentao::result<T>, callbacks still work.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "agentao.hpp"

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#error "this test must be built with -fno-exceptions"
#endif

static int failures = 0;
#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            failures++;                                                      \
        }                                                                    \
    } while (0)

int main() {
    char dir[] = "/tmp/agentao-noexcept-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    std::string cfg = std::string("{\"working_directory\":\"") + dir +
                      "\",\"llm\":{\"provider\":\"scripted\",\"script\":{\"responses\":["
                      "{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":"
                      "{\"file_path\":\"out.txt\",\"content\":\"x\"}}]},{\"text\":\"written\"}]}}}";

    auto bad = agentao::agent::try_create("{");
    CHECK(!bad.ok());
    CHECK(bad.code() == agentao::status::invalid_json);

    std::thread answerer;
    agentao::transport t;
    t.confirm_tool = [&](const agentao::tool_confirmation&, agentao::reply&& r) {
        answerer = std::thread([r = std::move(r)]() mutable {
            CHECK(r.try_confirm(agentao::confirmation::allow).ok());
        });
    };
    auto created = agentao::agent::try_create(cfg, std::move(t));
    CHECK(created.ok());
    if (!created) return 1;
    agentao::agent a = std::move(created).value();
    auto text = a.try_chat("write");
    if (answerer.joinable()) answerer.join();
    CHECK(text.ok() && text.value() == "written");
    CHECK(a.try_chat(std::string_view("a\0b", 3)).code() == agentao::status::invalid_argument);
    auto hist = a.try_history();
    CHECK(hist.ok() && hist.value().find("written") != std::string::npos);
    CHECK(a.try_set_permission_mode("plan").code() == agentao::status::no_engine);

    agentao::cancel_token tok;
    tok.cancel("stop");
    agentao::turn_options opts;
    opts.cancel = &tok;
    auto cancelled = a.try_chat("again", opts);
    CHECK(cancelled.code() == agentao::status::cancelled);
    CHECK(tok.try_reason().ok() && tok.try_reason().value() == "stop");

    std::string rm = std::string("rm -rf ") + dir;
    if (std::system(rm.c_str()) != 0) failures++;
    if (failures) return 1;
    std::printf("noexcept API: all checks passed\n");
    return 0;
}
