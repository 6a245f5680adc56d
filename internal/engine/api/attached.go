package api

// VirtualMachine describes an attached machine reached over SSH. Password and PrivateKey
// are inputs only: the engine keeps them in its store and never returns them, so every
// read of an attached compute has them empty.
type VirtualMachine struct {
	Address string `json:"address"`
	// SSHPort is the SSH port; 0 in a spec means DefaultSSHPort.
	SSHPort  int64  `json:"ssh_port,omitempty"`
	Username string `json:"username"`
	// Password and PrivateKey (PEM, no passphrase): exactly one.
	Password   string `json:"password,omitempty"`
	PrivateKey string `json:"private_key,omitempty"`
	// HostKeyFingerprint pins the machine's host key, OpenSSH "SHA256:..." form. Empty in
	// a spec pins the first key seen; a read returns the pinned one.
	HostKeyFingerprint string `json:"host_key_fingerprint,omitempty"`
	// VCPUs and MemoryGB are what the machine reported when it was attached.
	VCPUs    int64   `json:"vcpus,omitempty"`
	MemoryGB float64 `json:"memory_gb,omitempty"`
}

// DefaultSSHPort is an attached machine's SSH port when none is given.
const DefaultSSHPort = 22
