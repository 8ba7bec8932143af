// swift-tools-version:6.0
// The Swift worker of `bench --only bindings` (bench/bench_bindings.c): the binding in
// bindings/swift, as a host depends on it by path. bench/run.sh builds it in release mode inside
// the Debian 13 root of scripts/swift-root.sh.
import PackageDescription

let package = Package(
    name: "bind-swift",
    dependencies: [.package(path: "../../../bindings/swift")],
    targets: [
        .executableTarget(
            name: "bind-swift",
            dependencies: [.product(name: "Agentao", package: "swift")]
        ),
    ]
)
