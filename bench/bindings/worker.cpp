// The C++ worker of `bench --only bindings` (bench/bench_bindings.c describes the protocol and
// the scenarios): the same workloads as the C worker, through bindings/cpp/agentao.hpp as a host
// writes them.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <future>
#include <iostream>
#include <optional>
#include <string>

#include "agentao.hpp"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_ZERO_STATS
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS
#endif

namespace {

double seconds(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

enum class scenario { delta, emit, event, turn, event_json };

scenario parse(const std::string& name) {
    if (name == "delta") return scenario::delta;
    if (name == "emit") return scenario::emit;
    if (name == "event") return scenario::event;
    if (name == "turn") return scenario::turn;
    if (name == "event-json") return scenario::event_json;
    std::fprintf(stderr, "bind-cpp: unknown scenario %s\n", name.c_str());
    std::exit(1);
}

struct worker {
    std::optional<agentao::agent> agents[5];
    std::atomic<long> units[5]{};

    void setup(scenario s, const std::string& config) {
        auto& n = units[int(s)];
        if (s == scenario::emit) {
            agentao::transport t;
            t.emit = [&n](std::string_view ev) {
                if (ev.substr(0, 18) == R"({"type":"llm_text")") n.fetch_add(1, std::memory_order_relaxed);
            };
            agents[int(s)] = agentao::agent::create(config, std::move(t));
            return;
        }
        agents[int(s)] = agentao::agent::create(config);
        // The observer takes the JSON: `event` and `event-json` are the same here.
        if (s == scenario::event || s == scenario::event_json)
            agents[int(s)]->try_add_observer([&n](std::string_view) { n.fetch_add(1, std::memory_order_relaxed); })
                .value();
    }

    void turn(scenario s) {
        agentao::agent& a = *agents[int(s)];
        auto& n = units[int(s)];
        if (s == scenario::delta) {
            std::promise<agentao::turn_result> done;
            a.try_stream("go", [&n](std::string_view) { n.fetch_add(1, std::memory_order_relaxed); },
                         [&done](agentao::turn_result r) { done.set_value(std::move(r)); })
                .value();
            if (!done.get_future().get().ok()) {
                std::fprintf(stderr, "bind-cpp: stream failed\n");
                std::exit(1);
            }
            return;
        }
        a.chat("go");
        if (s == scenario::turn) n.fetch_add(1, std::memory_order_relaxed);
    }
};

}  // namespace

int main() {
    worker w;
    std::string line;
    while (std::getline(std::cin, line)) {
        size_t a = line.find(' '), b = line.find(' ', a + 1);
        std::string cmd = line.substr(0, a), name = line.substr(a + 1, b - a - 1);
        std::string rest = b == std::string::npos ? "" : line.substr(b + 1);
        scenario s = parse(name);
        if (cmd == "setup") {
            w.setup(s, rest);
            std::printf("ok\n");
            std::fflush(stdout);
            continue;
        }
        int turns = std::atoi(rest.c_str());
        bool cg = cmd == "cg";
        if (cg) {
            w.turn(s);
            w.agents[int(s)]->set_history("[]");
            CALLGRIND_ZERO_STATS;
        }
        w.units[int(s)] = 0;
        double cpu = 0, wall = 0;
        for (int i = 0; i < turns; i++) {
            double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), t0 = seconds(CLOCK_MONOTONIC);
            w.turn(s);
            cpu += seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
            wall += seconds(CLOCK_MONOTONIC) - t0;
            w.agents[int(s)]->set_history("[]");
        }
        if (cg) {
            CALLGRIND_DUMP_STATS;
            std::printf("ok\n");
        } else {
            std::printf("%.0f %.0f %ld\n", cpu * 1e9, wall * 1e9, w.units[int(s)].load());
        }
        std::fflush(stdout);
    }
    return 0;
}
