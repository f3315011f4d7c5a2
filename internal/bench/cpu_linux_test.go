//go:build linux

package bench

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/internal/testenv"
)

func TestParseProcStatCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	busy, total, err := parseProcStatCPU("cpu  100 2 30 500 40 5 6 7 50 0")
	if err != nil || busy != 100+2+30+5+6+7 || total != busy+500+40 {
		t.Errorf("busy %d, total %d, err %v", busy, total, err)
	}
	// Old kernels have no steal column.
	if busy, total, err := parseProcStatCPU("cpu 1 2 3 4 5 6 7"); err != nil || busy != 1+2+3+6+7 || total != busy+4+5 {
		t.Errorf("7 fields: busy %d, total %d, err %v", busy, total, err)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8", ""} {
		if _, _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%q parsed without error", bad)
		} else if !strings.Contains(err.Error(), "/proc/stat") {
			t.Errorf("%q: error %q does not name /proc/stat", bad, err)
		}
	}
	if busy, total, ok := machineCPU(); !ok || total == 0 || busy > total {
		t.Errorf("machineCPU() = %d, %d, %v", busy, total, ok)
	}
}

func TestParseProcPidStat(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 250, stime 50.
	line := "4242 (redis-server (x) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 5 0 1000 1000 100"
	if v, err := parseProcPidStat(line); err != nil || v != 3.0 {
		t.Errorf("parseProcPidStat = %v, %v, want 3 s", v, err)
	}
	for _, bad := range []string{"", "4242 redis-server S 1", "1 (a) S 1 2 3 4 5 6 7 8 9 10 x 5"} {
		if _, err := parseProcPidStat(bad); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
	// This process's own line reads, and is counted.
	if v := procCPUs([]int{os.Getpid()}); len(v) != 1 || v[0] < 0 {
		t.Errorf("procCPUs(self) = %v", v)
	}
	if v := procCPUs([]int{0}); v != nil {
		t.Errorf("procCPUs(0) = %v, want nil", v)
	}
}

// The MySQL server's CPU is read from the process its pid file names,
// only if that process has the server's name.
func TestPidFromFile(t *testing.T) {
	dir := t.TempDir()
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "x.pid")
	if err := os.WriteFile(file, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := pidFromFile(file, strings.TrimSpace(string(self))); got != os.Getpid() {
		t.Errorf("pidFromFile(own pid, own name) = %d, want %d", got, os.Getpid())
	}
	if got := pidFromFile(file, "mariadbd", "mysqld"); got != 0 {
		t.Errorf("pidFromFile(own pid, mariadbd) = %d, want 0: another process taken for the server", got)
	}
	if got := pidFromFile(filepath.Join(dir, "missing.pid"), "mariadbd"); got != 0 {
		t.Errorf("pidFromFile(missing file) = %d, want 0", got)
	}
}

func TestMySQLServerPID(t *testing.T) {
	db, err := sql.Open("mysql", testenv.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		testenv.Unavailable(t, "mysql", err)
	}
	var path string
	if err := db.QueryRow("SELECT @@pid_file").Scan(&path); err != nil {
		t.Fatal(err)
	}
	pid, err := mysqlServerPID(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	b, ferr := os.ReadFile(path)
	if ferr != nil {
		if pid != 0 {
			t.Fatalf("mysqlServerPID = %d although %s cannot be read (server not local)", pid, path)
		}
		return
	}
	if want, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid != want {
		t.Fatalf("mysqlServerPID = %d, want %d from %s", pid, want, path)
	}
}
