package runconfig

import (
	"path/filepath"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/alerts/outbox"
)

// TestResolvePaths: every file path of the config is anchored at dir when
// relative, and left alone when absolute or empty (empty keeps its meaning:
// default calibration, no password file).
func TestResolvePaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	abs := filepath.Join(t.TempDir(), "ca.pem")
	c := AlertsConfig{Config: alerts.Config{Calibration: "cal/calibration.yaml"}}
	c.MQTT = mqttpub.Config{PasswordFile: "", TLS: &mqttpub.TLSFiles{CA: abs, Cert: "tls/cert.pem", Key: "../key.pem", ServerName: "broker"}}
	c.Outbox = outbox.Config{Dir: "outbox"}
	c.Embedded = broker.Config{Users: []broker.UserConfig{{Username: "a", PasswordFile: "a.pw"}, {Username: "b", PasswordEnv: "B_PW"}},
		TLS: &broker.TLSListenerConfig{Listen: "0.0.0.0:8883", Cert: "tls/server.pem", Key: abs}}
	c.Snapshots.Dir = "snaps"
	c.ResolvePaths(dir)
	tests := []struct{ key, got, want string }{
		{"calibration", c.Calibration, filepath.Join(dir, "cal", "calibration.yaml")},
		{"mqtt.password_file", c.MQTT.PasswordFile, ""},
		{"mqtt.tls.ca", c.MQTT.TLS.CA, abs},
		{"mqtt.tls.cert", c.MQTT.TLS.Cert, filepath.Join(dir, "tls", "cert.pem")},
		{"mqtt.tls.key", c.MQTT.TLS.Key, filepath.Join(filepath.Dir(dir), "key.pem")},
		{"mqtt.tls.server_name", c.MQTT.TLS.ServerName, "broker"},
		{"outbox.dir", c.Outbox.Dir, filepath.Join(dir, "outbox")},
		{"embedded.users[0].password_file", c.Embedded.Users[0].PasswordFile, filepath.Join(dir, "a.pw")},
		{"embedded.users[1].password_file", c.Embedded.Users[1].PasswordFile, ""},
		{"embedded.tls.cert", c.Embedded.TLS.Cert, filepath.Join(dir, "tls", "server.pem")},
		{"embedded.tls.key", c.Embedded.TLS.Key, abs},
		{"embedded.tls.client_ca", c.Embedded.TLS.ClientCA, ""},
		{"snapshots.dir", c.Snapshots.Dir, filepath.Join(dir, "snaps")},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.key, tc.got, tc.want)
		}
	}
}
