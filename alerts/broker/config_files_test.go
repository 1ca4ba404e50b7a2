package broker

import "testing"

// TestConfigFiles: the section names its password and TLS files under the
// caller's prefix, in order, leaving out those not given.
func TestConfigFiles(t *testing.T) {
	c := Config{Users: []UserConfig{{Username: "a", PasswordEnv: "E"}, {Username: "b", PasswordFile: "/p/b"}},
		TLS: &TLSListenerConfig{Cert: "/t/c", ClientCA: "/t/ca"}}
	got := c.Files("alerts.embedded.")
	want := []string{"alerts.embedded.users[1].password_file=/p/b", "alerts.embedded.tls.cert=/t/c", "alerts.embedded.tls.client_ca=/t/ca"}
	if len(got) != len(want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	for i, f := range got {
		if f.Key+"="+f.Path != want[i] {
			t.Errorf("file %d: %s=%s, want %s", i, f.Key, f.Path, want[i])
		}
	}
	if n := len((Config{}).Files("x.")); n != 0 {
		t.Errorf("a section without files names %d", n)
	}
}
