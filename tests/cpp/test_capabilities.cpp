// Capabilities, MCP, preflight and sub-agents through the C++ binding: a virtual file system
// serves read_file, a host shell executor runs run_shell_command, a host memory store keeps
// save_memory's record; MCP status with no server, a failing server and a registry's server.
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "helpers.hpp"

using namespace th;

namespace capabilities_test {

std::string call(const std::string& id, const std::string& tool, const std::string& args,
                 const std::string& final_text = "done") {
    return R"({"tool_calls":[{"id":")" + id + R"(","name":")" + tool + R"(","arguments":)" + args +
           R"(}]},{"text":")" + final_text + R"("})";
}

}  // namespace capabilities_test

using namespace capabilities_test;

TEST(Capabilities, VirtualFileSystemServesReadFile) {
    workspace ws;
    std::string root = ws.path().string();
    std::mutex mu;
    std::map<std::string, std::string> files{{root + "/notes.txt", "served from memory\n"}};
    std::vector<std::string> asked;
    agentao::file_system fs;
    fs.read = [&](std::string_view path, uint64_t max_bytes, agentao::fs_answer& out) {
        std::lock_guard<std::mutex> g(mu);
        asked.emplace_back(path);
        auto it = files.find(std::string(path));
        if (it == files.end()) return ENOENT;
        std::string_view data = it->second;
        EXPECT_TRUE(out.try_set_data(data.substr(0, max_bytes)).ok());
        return 0;
    };
    fs.stat = [&](std::string_view path, agentao::fs_answer& out) {
        std::lock_guard<std::mutex> g(mu);
        auto it = files.find(std::string(path));
        if (it != files.end()) {
            EXPECT_TRUE(out.try_set_stat(it->second.size(), 1000.0, agentao::fs_kind::file).ok());
            return 0;
        }
        if (path == root) {
            EXPECT_TRUE(out.try_set_stat(0, 1000.0, agentao::fs_kind::dir).ok());
            return 0;
        }
        return ENOENT;
    };
    fs.write = [&](std::string_view path, std::string_view data, bool append) {
        std::lock_guard<std::mutex> g(mu);
        auto& f = files[std::string(path)];
        f = append ? f + std::string(data) : std::string(data);
        return 0;
    };
    fs.exists = [&](std::string_view path) -> bool {
        std::lock_guard<std::mutex> g(mu);
        if (path == "/throws") throw std::runtime_error("never reached");
        return files.count(std::string(path)) > 0 || path == root;
    };
    auto a = agentao::agent::create(
        config(ws, call("r1", "read_file", R"({"file_path":"notes.txt"})", "read") + "," +
                       call("w1", "write_file", R"({"file_path":"new.txt","content":"virtual"})", "wrote")));
    a.set_file_system(std::move(fs));
    EXPECT_EQ(a.chat("read it"), "read");
    // The file exists only in the host's map: the tool read it through the binding.
    EXPECT_FALSE(exists(ws.file("notes.txt")));
    EXPECT_TRUE(contains(a.history(), "served from memory")) << a.history();
    EXPECT_EQ(a.chat("write it"), "wrote");
    EXPECT_FALSE(exists(ws.file("new.txt")));
    {
        std::lock_guard<std::mutex> g(mu);
        EXPECT_EQ(files[root + "/new.txt"], "virtual");
        EXPECT_FALSE(asked.empty());
    }
    // Back to the local disk.
    a.try_set_file_system(std::nullopt).value();
}

TEST(Capabilities, FileSystemSlotThatThrowsIsAnError) {
    workspace ws;
    agentao::file_system fs;
    fs.read = [](std::string_view, uint64_t, agentao::fs_answer&) -> int {
        throw std::runtime_error("remote store offline");
    };
    fs.stat = [](std::string_view, agentao::fs_answer& out) {
        EXPECT_TRUE(out.try_set_stat(3, 1000.0, agentao::fs_kind::file).ok());
        return 0;
    };
    auto a = agentao::agent::create(config(ws, call("r1", "read_file", R"({"file_path":"x.txt"})")));
    a.set_file_system(std::move(fs));
    EXPECT_EQ(a.chat("read"), "done");
    auto hist = a.history();
    // The slot's exception is reported as EIO, never unwound into the library.
    EXPECT_TRUE(contains(hist, "Input/output error") || contains(hist, "os error 5")) << hist;
}

TEST(Capabilities, ShellExecutorRunsTheCommand) {
    workspace ws;
    std::mutex mu;
    std::vector<std::string> commands;
    agentao::shell_executor sh;
    sh.run = [&](const agentao::shell_request& req, agentao::shell_run&& run) {
        {
            std::lock_guard<std::mutex> g(mu);
            commands.emplace_back(req.command);
        }
        EXPECT_EQ(req.cwd, ws.path().string());
        EXPECT_FALSE(req.cancelled());
        if (req.command == "explode") throw std::runtime_error("sandbox unavailable");
        EXPECT_TRUE(run.try_output(agentao::shell_stream::out, "built by the host\n").ok());
        EXPECT_TRUE(run.try_finish(0).ok());
    };
    auto a = agentao::agent::create(
        config(ws, call("s1", "run_shell_command", R"({"command":"make all"})", "made") + "," +
                       call("s2", "run_shell_command", R"({"command":"explode"})", "exploded")));
    a.set_shell_executor(std::move(sh));
    EXPECT_EQ(a.chat("build"), "made");
    EXPECT_TRUE(contains(a.history(), "built by the host")) << a.history();
    EXPECT_EQ(a.chat("again"), "exploded");
    EXPECT_TRUE(contains(a.history(), "Error starting command: the host executor threw: sandbox unavailable"))
        << a.history();
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(commands.size(), 2u);
    EXPECT_EQ(commands[0], "make all");
    // An executor without run is refused with a clear status.
    EXPECT_EQ(a.try_set_shell_executor(agentao::shell_executor{}).code(), agentao::status::null_argument);
}

TEST(Capabilities, ShellExecutorStopsARunFromItsCancelWatch) {
    // An audited shell that owns a long process stops it from the run's cancel watch, without
    // polling `cancelled()`; the watch runs once, on the cancelling thread.
    workspace ws;
    std::mutex mu;
    std::vector<std::string> reasons;
    std::thread::id watch_thread;
    std::optional<agentao::cancel_watch> watch;
    agentao::shell_executor sh;
    sh.run = [&](const agentao::shell_request& req, agentao::shell_run&& run) {
        auto kept = std::make_shared<agentao::shell_run>(std::move(run));
        auto w = req.on_cancel([&, kept](std::string_view reason) {
            std::lock_guard<std::mutex> g(mu);
            reasons.emplace_back(reason);
            watch_thread = std::this_thread::get_id();
            (void)kept->try_finish(130);
        });
        std::lock_guard<std::mutex> g(mu);
        watch.emplace(std::move(w));
    };
    auto a = agentao::agent::create(
        config(ws, call("s1", "run_shell_command", R"({"command":"sleep 600"})", "slept")));
    a.set_shell_executor(std::move(sh));
    agentao::cancel_token tok;
    agentao::turn_options opts;
    opts.cancel = &tok;
    std::atomic<bool> done{false};
    agentao::turn_result res;
    a.run("go", [&](agentao::turn_result r) { res = std::move(r); done = true; }, opts);
    ASSERT_TRUE(wait_until([&] { std::lock_guard<std::mutex> g(mu); return watch.has_value(); }));
    tok.cancel("host-stop");
    ASSERT_TRUE(wait_until([&] { return done.load(); }));
    EXPECT_EQ(res.code, agentao::status::cancelled) << res.message;
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(reasons.size(), 1u);
    EXPECT_EQ(reasons[0], "host-stop");
    EXPECT_EQ(watch_thread, std::this_thread::get_id()) << "the watch ran off the cancelling thread";
}

TEST(Capabilities, MemoryStoreKeepsSaveMemory) {
    workspace ws;
    std::mutex mu;
    std::vector<std::string> upserts;
    std::atomic<int> lists{0};
    agentao::memory_store store;
    store.upsert = [&](std::string_view record) {
        std::lock_guard<std::mutex> g(mu);
        if (contains(std::string(record), "fail_me")) throw std::runtime_error("store is read-only");
        upserts.emplace_back(record);
    };
    store.list = [&](std::optional<std::string_view>) {
        lists++;
        return std::string("[]");
    };
    auto a = agentao::agent::create(config(
        ws, call("m1", "save_memory", R"({"key":"Preferred Language","value":"Rust"})", "saved") + "," +
                call("m2", "save_memory", R"({"key":"fail_me","value":"x"})", "refused")));
    a.set_memory_store(std::move(store));
    EXPECT_EQ(a.chat("remember"), "saved");
    EXPECT_TRUE(contains(a.history(), "Saved memory: preferred_language")) << a.history();
    {
        std::lock_guard<std::mutex> g(mu);
        ASSERT_EQ(upserts.size(), 1u);
        EXPECT_TRUE(contains(upserts[0], kv("key_normalized", "preferred_language"))) << upserts[0];
        EXPECT_TRUE(contains(upserts[0], kv("content", "Rust"))) << upserts[0];
    }
    EXPECT_GE(lists.load(), 1);
    EXPECT_EQ(a.chat("remember more"), "refused");
    EXPECT_TRUE(contains(a.history(), "Error saving memory: the memory store failed `upsert`: store is read-only"))
        << a.history();
    // A store without list is refused, and the binding frees what it allocated (ASan run).
    agentao::memory_store half;
    half.upsert = [](std::string_view) {};
    EXPECT_EQ(a.try_set_memory_store(std::move(half)).code(), agentao::status::null_argument);
}

TEST(Mcp, StatusWithNoServersAndAFailingServer) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"fine"})"));
    auto st = a.mcp_status();
    EXPECT_TRUE(contains(st, R"("servers":[])")) << st;

    workspace ws2;
    auto b = agentao::agent::create(
        config(ws2, R"({"text":"fine"})", R"("mcp_servers":{"gone":{"command":"/nonexistent/mcp-server"}})"));
    EXPECT_EQ(b.chat("go"), "fine");
    st = b.mcp_status();
    EXPECT_TRUE(contains(st, R"({"name":"gone","status":"error")")) << st;
    agentao::agent empty;
    EXPECT_EQ(empty.try_mcp_status().code(), agentao::status::null_argument);
}

TEST(Skills, ReportAndActivation) {
    workspace ws;
    fs::create_directories(ws.path() / "skills" / "pdf");
    {
        std::ofstream f(ws.path() / "skills" / "pdf" / "SKILL.md");
        f << "---\nname: pdf\ndescription: Fill PDF forms.\n---\n# PDF\nUse fill.py.\n";
    }
    auto a = agentao::agent::create(config(
        ws,
        R"({"tool_calls":[{"id":"a1","name":"activate_skill","arguments":{"skill_name":"pdf","task_description":"fill"}}]},)"
        R"({"text":"done"})",
        R"("skills":{"user_directory":null})"));
    auto report = a.skills();
    EXPECT_TRUE(contains(report, R"("name":"pdf")")) << report;
    EXPECT_TRUE(contains(report, R"("origin":"repository")")) << report;
    EXPECT_EQ(a.chat("fill it"), "done");
    EXPECT_TRUE(contains(a.history(), "Skill Activated: pdf")) << a.history();
    EXPECT_TRUE(contains(a.history(), "Use fill.py.")) << a.history();
    agentao::agent empty;
    EXPECT_EQ(empty.try_skills().code(), agentao::status::null_argument);
}

TEST(Mcp, RegistryServersAppearInTheStatus) {
    workspace ws;
    std::atomic<int> asked{0};
    auto a = agentao::agent::create(config(ws, R"({"text":"one"},{"text":"two"})"));
    a.set_mcp_registry([&]() -> std::optional<std::string> {
        asked++;
        return std::string(R"({"from_registry":{"command":"/nonexistent/registry-server"}})");
    });
    EXPECT_EQ(a.chat("go"), "one");
    EXPECT_GE(asked.load(), 1);
    auto st = a.mcp_status();
    EXPECT_TRUE(contains(st, R"("name":"from_registry")")) << st;
    // A registry whose function throws counts as "no servers"; the turn still runs.
    a.set_mcp_registry([]() -> std::optional<std::string> { throw std::runtime_error("registry down"); });
    EXPECT_EQ(a.chat("again"), "two");
    EXPECT_FALSE(contains(a.mcp_status(), "from_registry")) << a.mcp_status();
    EXPECT_EQ(a.try_set_mcp_registry(nullptr).code(), agentao::status::null_argument);
    a.try_set_mcp_registry(std::nullopt).value();
}

TEST(Preflight, AnswersWithoutRunning) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
    auto p = a.preflight("read_file", R"({"file_path":"a.txt"})");
    EXPECT_TRUE(contains(p, kv("outcome", "allow"))) << p;
    p = a.preflight("run_shell_command", R"({"command":"rm -rf /"})");
    EXPECT_FALSE(contains(p, kv("outcome", "allow"))) << p;
    EXPECT_EQ(a.try_preflight("no_such_tool", "{}").code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_preflight("read_file", "{oops").code(), agentao::status::invalid_json);
    EXPECT_FALSE(exists(ws.file("a.txt")));
}

TEST(Subagents, AddedDefinitionRunsAsATool) {
    workspace ws;
    std::string cfg = "{\"working_directory\":\"" + ws.path().string() +
                      R"(","llm":{"provider":"scripted","script":{"responses":[)" +
                      call("c1", "agent_helper_one", R"({"task":"summarise"})", "parent done") +
                      R"(],"subagents":{"helper-one":[{"text":"child summary"}]}}}})";
    auto a = agentao::agent::create(cfg);
    a.add_subagent(R"({"name":"helper-one","description":"Summarises.","max_turns":3})");
    EXPECT_EQ(a.chat("delegate"), "parent done");
    auto hist = a.history();
    EXPECT_TRUE(contains(hist, "child summary")) << hist;
    EXPECT_EQ(a.try_add_subagent(R"({"name":"x","max_turns":0})").code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_add_subagent("{oops").code(), agentao::status::invalid_json);
    EXPECT_EQ(a.try_add_subagent(R"({"name":"y","bogus":1})").code(), agentao::status::invalid_argument);
}
