package validation

import (
	"errors"
	"net"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// HostKeyFingerprintRE is the OpenSSH SHA256 fingerprint form ssh-keygen -l prints.
var HostKeyFingerprintRE = lazyregexp.New(`^SHA256:[A-Za-z0-9+/]{43}$`)

var usernameRE = lazyregexp.New(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$`)

// AttachedCompute checks an attached compute's spec: its name (as for clusters) and
// exactly one of its virtual_machine and kubernetes blocks.
func AttachedCompute(spec api.ComputeSpec) error {
	if err := ComputeName.Check("name", spec.Name); err != nil {
		return err
	}
	switch {
	case spec.VirtualMachine != nil && spec.Kubernetes != nil:
		return api.Errorf(api.CodeInvalid, "kubernetes", "set exactly one of virtual_machine and kubernetes: both are set")
	case spec.VirtualMachine == nil && spec.Kubernetes == nil:
		return api.Errorf(api.CodeInvalid, "virtual_machine", "an attached compute needs exactly one of virtual_machine = { address, username, and a password or private_key } and kubernetes = { kubeconfig, ... }")
	}
	if spec.VMSize != "" || spec.ScaleSettings != nil || spec.Instance != nil {
		return api.Errorf(api.CodeInvalid, "type", "an attached compute has no vm_size, scale_settings or instance settings: it is the machine or cluster itself")
	}
	if spec.Kubernetes != nil {
		return Kubernetes(*spec.Kubernetes)
	}
	return VirtualMachine(*spec.VirtualMachine)
}

// VirtualMachine checks an attached machine's connection settings.
func VirtualMachine(vm api.VirtualMachine) error {
	if err := SSHAddress(vm.Address); err != nil {
		return err
	}
	if vm.SSHPort < 0 || vm.SSHPort > 65535 {
		return api.Errorf(api.CodeInvalid, "virtual_machine.ssh_port", "virtual_machine.ssh_port must be between 1 and 65535, got %d", vm.SSHPort)
	}
	if !usernameRE.MatchString(vm.Username) {
		return api.Errorf(api.CodeInvalid, "virtual_machine.username", "virtual_machine.username %q is not a login name: 1 to 32 letters, digits, '.', '_' or '-', not starting with '.' or '-'", vm.Username)
	}
	if err := Credentials(vm.Password, vm.PrivateKey); err != nil {
		return err
	}
	if vm.HostKeyFingerprint != "" {
		if err := HostKeyFingerprint(vm.HostKeyFingerprint); err != nil {
			return err
		}
	}
	return nil
}

// SSHAddress checks a machine's address: a host name or an IP address, without a port.
func SSHAddress(addr string) error {
	const field = "virtual_machine.address"
	switch {
	case addr == "":
		return api.Errorf(api.CodeInvalid, field, "virtual_machine.address is required: the machine's host name or IP address")
	case strings.ContainsAny(addr, " \t\r\n@/"):
		return api.Errorf(api.CodeInvalid, field, "virtual_machine.address %q must be a host name or an IP address, without user@ or a path", addr)
	case strings.Contains(addr, ":") && net.ParseIP(addr) == nil:
		return api.Errorf(api.CodeInvalid, field, "virtual_machine.address %q must not carry a port; set ssh_port instead", addr)
	}
	return nil
}

// Credentials checks that exactly one of password and private key is set, and that the
// key is an unencrypted private key SSH can use. Messages never show either value.
func Credentials(password, privateKey string) error {
	switch {
	case password == "" && privateKey == "":
		return api.Errorf(api.CodeInvalid, "virtual_machine.password", "set exactly one of virtual_machine.password and virtual_machine.private_key: neither is set")
	case password != "" && privateKey != "":
		return api.Errorf(api.CodeInvalid, "virtual_machine.private_key", "set exactly one of virtual_machine.password and virtual_machine.private_key: both are set")
	case privateKey != "":
		return PrivateKey(privateKey)
	}
	return nil
}

// PrivateKey checks that key is a PEM private key without a passphrase.
func PrivateKey(key string) error {
	const field = "virtual_machine.private_key"
	_, err := gossh.ParsePrivateKey([]byte(key))
	var pe *gossh.PassphraseMissingError
	switch {
	case errors.As(err, &pe):
		return api.Errorf(api.CodeInvalid, field, "virtual_machine.private_key is protected by a passphrase, which is not supported; use a key without one (for example a dedicated deploy key)")
	case err != nil:
		// The parser's message names the format problem, never the key's content.
		return api.Errorf(api.CodeInvalid, field, "virtual_machine.private_key is not a PEM private key (OpenSSH, PKCS#1, PKCS#8 or EC): %v", err)
	}
	return nil
}

// HostKeyFingerprint checks the OpenSSH "SHA256:<43 base64 characters>" form.
func HostKeyFingerprint(fp string) error {
	if !HostKeyFingerprintRE.MatchString(fp) {
		return api.Errorf(api.CodeInvalid, "virtual_machine.host_key_fingerprint",
			"virtual_machine.host_key_fingerprint %q is not an OpenSSH SHA256 fingerprint such as SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub prints it)", fp)
	}
	return nil
}
