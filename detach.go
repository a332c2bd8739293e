package agentproc

// DefaultDetachLogBytes caps a detached process's output files
// (Request.Detach) without WithOutputLog: about half of it is the head, the
// rest the tail. It is defined on every platform, like every exported name,
// although only Linux runs detached processes.
const DefaultDetachLogBytes = 8 << 20
