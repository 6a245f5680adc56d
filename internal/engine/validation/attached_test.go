package validation

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestVirtualMachine(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := string(pem.EncodeToMemory(block))
	locked, err := gossh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	lockedKey := string(pem.EncodeToMemory(locked))
	ok := api.VirtualMachine{Address: "gpu-box.lab", Username: "ml", PrivateKey: key}

	for _, tc := range []struct {
		name  string
		edit  func(*api.VirtualMachine)
		field string // "" when valid
		says  string
	}{
		{"Valid", func(*api.VirtualMachine) {}, "", ""},
		{"IPv6", func(v *api.VirtualMachine) { v.Address = "fd00::5" }, "", ""},
		{"PasswordOnly", func(v *api.VirtualMachine) { v.PrivateKey, v.Password = "", "pw" }, "", ""},
		{"PinnedKey", func(v *api.VirtualMachine) {
			v.HostKeyFingerprint = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
		}, "", ""},
		{"NoAddress", func(v *api.VirtualMachine) { v.Address = "" }, "virtual_machine.address", "required"},
		{"AddressWithPort", func(v *api.VirtualMachine) { v.Address = "host:22" }, "virtual_machine.address", "set ssh_port"},
		{"AddressWithUser", func(v *api.VirtualMachine) { v.Address = "ml@host" }, "virtual_machine.address", "without user@"},
		{"Port", func(v *api.VirtualMachine) { v.SSHPort = 70000 }, "virtual_machine.ssh_port", "between 1 and 65535"},
		{"Username", func(v *api.VirtualMachine) { v.Username = "-x" }, "virtual_machine.username", "login name"},
		{"NoCredential", func(v *api.VirtualMachine) { v.PrivateKey = "" }, "virtual_machine.password", "neither is set"},
		{"BothCredentials", func(v *api.VirtualMachine) { v.Password = "pw" }, "virtual_machine.private_key", "both are set"},
		{"NotAKey", func(v *api.VirtualMachine) { v.PrivateKey = "hello" }, "virtual_machine.private_key", "not a PEM private key"},
		{"Passphrase", func(v *api.VirtualMachine) { v.PrivateKey = lockedKey }, "virtual_machine.private_key", "passphrase"},
		{"Fingerprint", func(v *api.VirtualMachine) { v.HostKeyFingerprint = "MD5:aa:bb" }, "virtual_machine.host_key_fingerprint", "SHA256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := ok
			tc.edit(&vm)
			err := VirtualMachine(vm)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if api.FieldOf(err) != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v (field %q), want %s saying %q", err, api.FieldOf(err), tc.field, tc.says)
			}
			if vm.Password != "" && strings.Contains(err.Error(), vm.Password) || strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatalf("the message shows a secret: %v", err)
			}
		})
	}
}
