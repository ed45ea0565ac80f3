// Package host runs the node's WebAssembly modules with wazero and is the
// only road from a module to a privileged effect.
//
// One Host holds one wazero.Runtime (one trust domain: the pinned module
// set), the compilation cache, a pool of instances per module, and the
// Gate that every host call passes. Invoke implements worker.Dispatcher:
// it decodes input blobs host-side, runs the method's module on a pooled
// instance, resumes suspended invocations without pinning an instance,
// and encodes output blobs into the payload. The ABI is in docs/ABI.md.
package host
