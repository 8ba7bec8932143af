// Shared helpers of the C++ binding tests: workspaces, scripted configs, JSON lookups, waits.
#ifndef AGENTAO_CPP_TEST_HELPERS_HPP
#define AGENTAO_CPP_TEST_HELPERS_HPP

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "agentao.hpp"

namespace th {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A fresh empty directory, removed when the object goes.
class workspace {
public:
    workspace() {
        std::string tmpl = (fs::temp_directory_path() / "agentao-cpptest-XXXXXX").string();
        if (!mkdtemp(tmpl.data())) std::abort();
        path_ = tmpl;
    }
    ~workspace() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    workspace(const workspace&) = delete;
    workspace& operator=(const workspace&) = delete;
    const fs::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    fs::path path_;
};

// A scripted-provider config: `responses` is the JSON list body, `extra` extra members.
inline std::string config(const workspace& ws, const std::string& responses,
                          const std::string& extra = "") {
    return "{\"working_directory\":\"" + ws.path().string() + "\"," + extra +
           (extra.empty() ? "" : ",") + "\"llm\":{\"provider\":\"scripted\",\"script\":{\"responses\":[" +
           responses + "]}}}";
}

inline const std::string WRITE_TURN =
    R"({"tool_calls":[{"id":"w1","name":"write_file","arguments":{"file_path":"out.txt","content":"deferred"}}]},)"
    R"({"text":"written"},{"text":"second turn"})";

inline const std::string LOOP =
    R"({"repeat":5,"text":"step {i}","tool_calls":[{"id":"l{i}","name":"list_directory","arguments":{"directory_path":"./d{i}"}}]},)"
    R"({"text":"final answer"})";

// The string value of the first "key":"..." (no unescaping beyond \" and \\).
inline std::string json_str(const std::string& json, const std::string& key) {
    std::string pat = "\"" + key + "\":\"";
    auto p = json.find(pat);
    if (p == std::string::npos) return "<absent>";
    std::string out;
    for (p += pat.size(); p < json.size() && json[p] != '"'; p++) {
        if (json[p] == '\\' && p + 1 < json.size()) p++;
        out += json[p];
    }
    return out;
}

inline bool contains(const std::string& hay, const std::string& needle) {
    return hay.find(needle) != std::string::npos;
}

inline std::string kv(const std::string& k, const std::string& v) {
    return "\"" + k + "\":\"" + v + "\"";
}

inline bool wait_until(const std::function<bool()>& cond,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (!cond()) {
        if (std::chrono::steady_clock::now() >= end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline bool exists(const std::string& path) { return fs::exists(path); }

inline long long ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
        .count();
}

}  // namespace th

#endif
