/* Unit tests: the supervisor's readiness probe of a runtime's Jupyter socket.
 * The socket lives in a directory the user's code can write, so the probe
 * (run as root) must not follow a planted link, must not take a socket the
 * sandbox's uid does not own, and must not open anything but a socket. */
#include "unit.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "supervisor/launch.h"

/* A listening Unix socket at path; returns its fd. */
static int listen_at(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static void test_probe(void **state)
{
	char dir[64], run[128], sock[160], elsewhere[160];
	uid_t me = geteuid();
	int fd, other;
	(void)state;

	unit_tempdir(dir);
	snprintf(run, sizeof(run), "%s/run", dir);
	snprintf(sock, sizeof(sock), "%s/jupyter.sock", run);
	snprintf(elsewhere, sizeof(elsewhere), "%s/root.sock", dir);
	assert_int_equal(mkdir(run, 0700), 0);

	/* nothing there yet */
	assert_int_equal(launch_probe(run, me), 0);
	/* a socket that answers, owned by the sandbox's uid: ready */
	fd = listen_at(sock);
	assert_int_equal(launch_probe(run, me), 1);
	/* the same socket owned by someone else: not the sandbox's */
	assert_int_equal(launch_probe(run, me + 1), 0);
	close(fd);
	unlink(sock);
	/* a link planted to another socket that answers: never followed */
	other = listen_at(elsewhere);
	assert_int_equal(symlink(elsewhere, sock), 0);
	assert_int_equal(launch_probe(run, me), 0);
	unlink(sock);
	/* a FIFO by that name (opening one could block): not a socket */
	assert_int_equal(mkfifo(sock, 0600), 0);
	assert_int_equal(launch_probe(run, me), 0);
	unlink(sock);
	/* a socket that no longer listens (Jupyter died): not ready */
	fd = listen_at(sock);
	close(fd);
	assert_int_equal(launch_probe(run, me), 0);
	close(other);
	unit_rmdir(dir);
}

/* A runtime image's Jupyter is its own /opt/labd/jupyter/bin/jupyter-<kind>, looked up
 * under the image's folder on the host and run by its path inside. */
static void test_image_env(void **state)
{
	char dir[64], bin[160], exe[200];
	int fd;
	(void)state;
	unit_tempdir(dir);
	assert_null(launch_image_env(dir, "lab"));
	snprintf(bin, sizeof(bin), "%s/opt/labd/jupyter/bin", dir);
	snprintf(exe, sizeof(exe), "mkdir -p '%s'", bin);
	assert_int_equal(system(exe), 0);
	snprintf(exe, sizeof(exe), "%s/jupyter-lab", bin);
	fd = open(exe, O_WRONLY | O_CREAT, 0755);
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(launch_image_env(dir, "lab"), "/opt/labd/jupyter");
	assert_null(launch_image_env(dir, "notebook"));
	snprintf(bin, sizeof(bin), "%s/opt/labd/jupyter", dir); /* the image's env, from the host */
	assert_string_equal(launch_pick_jupyter("auto", dir, bin), "lab");
	chmod(exe, 0644); /* not executable: not there */
	assert_null(launch_image_env(dir, "lab"));
	unit_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_image_env),
	};
	return cmocka_run_group_tests_name("launch", tests, NULL, NULL);
}
