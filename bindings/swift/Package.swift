// swift-tools-version:6.0
// Swift 6 language mode: complete strict-concurrency checking, as errors.
import PackageDescription

let package = Package(
    name: "Agentao",
    products: [
        .library(name: "Agentao", targets: ["Agentao"]),
    ],
    targets: [
        // The C library, found through pkg-config (agentao.pc from the library's install).
        .systemLibrary(name: "CAgentao", pkgConfig: "agentao"),
        .target(name: "Agentao", dependencies: ["CAgentao"]),
        // CAgentao too: a test registers a C observer beside the binding's, to compare bytes.
        .testTarget(name: "AgentaoTests", dependencies: ["Agentao", "CAgentao"]),
    ]
)
