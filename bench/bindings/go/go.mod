module github.com/agentao/libagentao/bench/bindings/go

go 1.23

require github.com/agentao/libagentao/bindings/go v0.0.0

replace github.com/agentao/libagentao/bindings/go => ../../../bindings/go
