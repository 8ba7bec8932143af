package agentao

import "runtime"

// runGC runs the collector twice, so that objects freed by finalizers are collected too.
func runGC() {
	runtime.GC()
	runtime.GC()
}
