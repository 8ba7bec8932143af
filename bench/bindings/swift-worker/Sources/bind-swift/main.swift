// The Swift worker of `bench --only bindings` (bench/bench_bindings.c describes the protocol and
// the scenarios): the same workloads as the C worker, through the public Swift API as a host
// writes them. The Swift binding has no synchronous chat, so a turn is `run` (async); the host
// events go to the typed observer (`addHostEventObserver`, decoded as the binding decodes them),
// and in `event-json` to the JSON observer (`addHostEventJSONObserver`, a `String` copy each).
import Agentao
import Glibc
import Synchronization

enum Scenario: Int {
    case delta, emit, event, turn, eventJSON

    init?(name: String) {
        switch name {
        case "delta": self = .delta
        case "emit": self = .emit
        case "event": self = .event
        case "turn": self = .turn
        case "event-json": self = .eventJSON
        default: return nil
        }
    }
}

/// What a scenario's callbacks saw (deltas, events, turns); written from library threads.
final class Counter: Sendable {
    private let n = Atomic<Int>(0)
    func add() { n.wrappingAdd(1, ordering: .relaxed) }
    func reset() { n.store(0, ordering: .relaxed) }
    var value: Int { n.load(ordering: .relaxed) }
}

/// A transport whose `emit` only counts the deltas' events.
struct CountingTransport: Transport {
    let counter: Counter
    func emit(_ event: AgentEvent) {
        if event.type == "llm_text" { counter.add() }
    }
}

func seconds(_ clock: clockid_t) -> Double {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

func fail(_ message: String) -> Never {
    let text = "bind-swift: \(message)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

/// Driven by the main loop alone, one command at a time, hence `@unchecked Sendable`.
final class Worker: @unchecked Sendable {
    var agents: [Agent?] = [nil, nil, nil, nil, nil]
    let counters = (0..<5).map { _ in Counter() }

    func setup(_ s: Scenario, _ config: String) throws {
        let transport: (any Transport)? = s == .emit ? CountingTransport(counter: counters[s.rawValue]) : nil
        let agent = try Agent(config: config, transport: transport)
        agents[s.rawValue] = agent
        if s == .event {
            let counter = counters[s.rawValue]
            try agent.addHostEventObserver { _ in counter.add() }
        }
        if s == .eventJSON {
            let counter = counters[s.rawValue]
            try agent.addHostEventJSONObserver { _ in counter.add() }
        }
    }

    func turn(_ s: Scenario) async throws {
        let agent = agents[s.rawValue]!
        let counter = counters[s.rawValue]
        switch s {
        case .delta:
            for try await item in agent.stream("go") {
                if case .text = item { counter.add() }
            }
        case .emit, .event, .eventJSON:
            _ = try await agent.run("go")
        case .turn:
            _ = try await agent.run("go")
            counter.add()
        }
    }
}

/// The command loop, off the main actor. Top-level code runs on the main actor, and each call
/// into the nonisolated `turn` hopped to the global executor and back: two thread switches a
/// turn (~4.5 µs) that the worker added, not the binding (a host awaiting from a task pays
/// neither; one awaiting on the main actor pays them whatever the binding does).
func serve() async {
    let worker = Worker()
    while let line = readLine() {
        let f = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard f.count == 3, let s = Scenario(name: f[1]) else { fail("bad command \(line)") }
        do {
            if f[0] == "setup" {
                try worker.setup(s, f[2])
                print("ok")
                fflush(nil)
                continue
            }
            guard f[0] == "run", let turns = Int(f[2]) else { fail("the Swift worker does not run \(line)") }
            worker.counters[s.rawValue].reset()
            var cpu = 0.0
            var wall = 0.0
            for _ in 0..<turns {
                let c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), t0 = seconds(CLOCK_MONOTONIC)
                try await worker.turn(s)
                cpu += seconds(CLOCK_PROCESS_CPUTIME_ID) - c0
                wall += seconds(CLOCK_MONOTONIC) - t0
                try worker.agents[s.rawValue]!.setHistoryJSON("[]")
            }
            print("\(Int64(cpu * 1e9)) \(Int64(wall * 1e9)) \(worker.counters[s.rawValue].value)")
            fflush(nil)
        } catch {
            fail("\(line.prefix(40)): \(error)")
        }
    }
}

await serve()
