package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL for the task history store's PostgreSQL backend: Debian's
// postgresql-15 server binaries, one server per instance on the instance's
// own loopback port, data in the state folder. Trust authentication on
// loopback, like the admin token: the sandbox is a throwaway local cluster.

const (
	postgresBin      = "/usr/lib/postgresql/15/bin"
	postgresUser     = "sandbox"
	postgresDatabase = "postgres"
	// capDACReadSearch lets the unprivileged server reach its data folder
	// under a home folder only root may enter (/root is 0700).
	capDACReadSearch = 2
)

func (in *instance) postgresDSN() string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", postgresUser, in.addr(portPostgres), postgresDatabase)
}

// postgresReady succeeds once the server accepts a query.
func (in *instance) postgresReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, in.postgresDSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// postgresCredential is who the server runs as. PostgreSQL refuses to run as
// root: as root the server runs as the package's "postgres" user (created by
// the package), otherwise as the current user.
func postgresCredential() (*syscall.SysProcAttr, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, os.Geteuid(), os.Getegid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("the postgres user (created by Debian's postgresql-15 package): %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, 0, 0, err
	}
	return &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		AmbientCaps: []uintptr{capDACReadSearch},
	}, uid, gid, nil
}

// installPostgres installs the package when its binaries are missing.
func installPostgres(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(postgresBin, "postgres")); err == nil {
		return nil
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "sandbox", "postgres.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("installing postgresql-15: %w\n%s", err, out)
	}
	return nil
}

// initPostgres creates the data folder once. initdb writes into a temporary
// folder that is renamed when complete, so a half-made cluster is never used.
func (in *instance) initPostgres(ctx context.Context, attr *syscall.SysProcAttr, uid, gid int) error {
	data := in.path("postgres")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return nil
	}
	tmp := data + ".init"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(postgresBin, "initdb"),
		"-D", tmp, "-U", postgresUser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = attr
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	return os.Rename(tmp, data)
}

func (in *instance) startPostgres(ctx context.Context, _ pki) error {
	if err := installPostgres(ctx); err != nil {
		return err
	}
	attr, uid, gid, err := postgresCredential()
	if err != nil {
		return err
	}
	if err := in.initPostgres(ctx, attr, uid, gid); err != nil {
		return err
	}
	args := []string{
		"-D", in.path("postgres"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(in.port(portPostgres)),
		"-c", "unix_socket_directories=", // TCP on loopback only
		// A throwaway database: no fsync, like etcd's --unsafe-no-fsync.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "log_min_messages=warning",
	}
	if err := in.launchAs("postgres", filepath.Join(postgresBin, "postgres"), args, attr); err != nil {
		return err
	}
	return in.waitFor(ctx, "postgres", 60*time.Second, in.postgresReady)
}
