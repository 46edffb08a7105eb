/* Writing workloads. The file is created in --dir and unlinked at once, so
 * it is gone even if the run is killed. Dirty pages a buffered run leaves
 * are written back after the measured region (and reported), so the next
 * run does not pay for this one's writeback. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "timing.h"
#include "wlopts.h"

static const char *fs_name(const char *dir)
{
    struct statfs s;
    if (statfs(dir, &s))
        return "unknown";
    switch ((unsigned long)s.f_type) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794c7630: return "overlay";
    case 0x6969: return "nfs";
    case 0x2FC12FC1: return "zfs";
    default: return "other";
    }
}

static const char *const what[] = {
    "writes into the page cache; the device is not waited for",
    "writes and one fsync at the end: the data reached the device",
    "O_DIRECT writes that bypass the page cache, straight to the device",
};

/* An unlinked file in dir: O_DIRECT when asked. */
static int open_scratch(probe_ctx *ctx, const char *dir, bool direct)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/quietcore-io-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0)
        return probe_fail(ctx, EXIT_USAGE, "invalid --dir '%s': cannot create a file there (%s)", dir,
                          strerror(errno)), -1;
    int direct_fd = direct ? open(path, O_WRONLY | O_DIRECT) : -1;
    int err = errno;
    unlink(path);
    if (!direct)
        return fd;
    close(fd);
    if (direct_fd < 0)
        probe_fail(ctx, EXIT_UNSUPPORTED, "--mode direct: %s does not support O_DIRECT (%s)", fs_name(dir),
                   strerror(err));
    return direct_fd;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w, len -= (size_t)w;
    }
    return 0;
}

static const char io_help[] =
    "usage: quietcore-probe io [--size BYTES] [--block BYTES] [--mode buffered|fsync|direct] [--dir PATH]\n"
    "                          [--cpus LIST] [--policy P]\n"
    "Write a file sequentially in blocks; the file is removed.\n"
    "  --size BYTES    total (default 256M)\n"
    "  --block BYTES   per write (default 4K, as the seed's fwrite)\n"
    "  --mode M        buffered (page cache), fsync (to the device), direct (O_DIRECT)\n"
    "  --dir PATH      where (default /var/tmp)\n";

int io_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "io",
                 .allowed = WO_SIZE | WO_BLOCK | WO_MODE | WO_DIR,
                 .size = 256u << 20,
                 .block = 4096,
                 .dir = "/var/tmp"};
    if (wl_parse(ctx, argc, argv, &o, io_help) || ctx->help_shown)
        return ctx->exit_code;
    if (o.block < 512)
        return probe_fail(ctx, EXIT_USAGE, "invalid --block %llu (valid: 512 bytes to 1G)", (unsigned long long)o.block);
    if (o.mode == IO_DIRECT && o.block % 4096)
        return probe_fail(ctx, EXIT_USAGE, "invalid --block %llu for --mode direct (valid: a multiple of 4096)",
                          (unsigned long long)o.block);
    if (wl_setup(ctx, &o))
        return ctx->exit_code;
    int fd = open_scratch(ctx, o.dir, o.mode == IO_DIRECT);
    if (fd < 0)
        return ctx->exit_code;
    char *buf;
    if (posix_memalign((void **)&buf, 4096, o.block))
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    memset(buf, 'q', o.block);
    uint64_t blocks = (o.size + o.block - 1) / o.block;
    wl_measure m;
    wl_begin(&m);
    int failed = 0;
    for (uint64_t b = 0; b < blocks && !failed; b++)
        failed = write_all(fd, buf, o.block);
    if (!failed && o.mode == IO_FSYNC)
        failed = fsync(fd);
    wl_end(&m);
    int err = errno;
    uint64_t t0 = mono_ns();
    if (o.mode == IO_BUFFERED)
        fsync(fd);
    uint64_t writeback = mono_ns() - t0;
    close(fd);
    free(buf);
    if (failed)
        return probe_fail(ctx, EXIT_FAIL, "write to %s failed: %s", o.dir, strerror(err));
    wl_note_ran(ctx);
    static const char *const modes[] = {"buffered", "fsync", "direct"};
    double wall_s = (double)(m.t1 - m.t0) / 1e9;
    json_obj_begin(result);
    wl_emit_head(result, &o, "wall_s", "s", wall_s, false);
    json_kv_str(result, "mode", modes[o.mode]);
    json_kv_str(result, "measures", what[o.mode]);
    json_kv_str(result, "dir", o.dir);
    json_kv_str(result, "filesystem", fs_name(o.dir));
    json_kv_u64(result, "bytes", blocks * o.block);
    json_kv_u64(result, "block", o.block);
    json_kv_f64(result, "bytes_per_s", (double)(blocks * o.block) / wall_s);
    json_kv_u64(result, "writeback_after_ns", writeback);
    wl_emit(result, &m);
    json_obj_end(result);
    return EXIT_OK;
}

static const char mixed_help[] =
    "usage: quietcore-probe mixed [--iters ROWS] [--every ROWS] [--checkpoint BYTES] [--dir PATH]\n"
    "                             [--cpus LIST] [--policy P]\n"
    "Compute in rows, writing a checkpoint (write + fdatasync) every few rows.\n"
    "  --iters ROWS        rows of 100000 multiply-adds (default 3000)\n"
    "  --every ROWS        rows between checkpoints (default 300)\n"
    "  --checkpoint BYTES  per checkpoint (default 4M)\n"
    "  --dir PATH          where (default /var/tmp)\n";

int mixed_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "mixed",
                 .allowed = WO_ITERS | WO_EVERY | WO_CHECKPOINT | WO_DIR,
                 .iters = 3000,
                 .every = 300,
                 .checkpoint = 4u << 20,
                 .dir = "/var/tmp"};
    if (wl_parse(ctx, argc, argv, &o, mixed_help) || ctx->help_shown || wl_setup(ctx, &o))
        return ctx->exit_code;
    int fd = open_scratch(ctx, o.dir, false);
    if (fd < 0)
        return ctx->exit_code;
    char *buf = malloc(o.checkpoint);
    if (!buf)
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    double x = 1.0;
    uint64_t checkpoints = 0, io_ns = 0;
    int failed = 0;
    wl_measure m;
    wl_begin(&m);
    for (uint64_t row = 1; row <= o.iters && !failed; row++) {
        for (int k = 0; k < 100000; k++)
            x = x * 1.0000001 + 1e-7;
        if (row % o.every == 0) {
            uint64_t t0 = mono_ns();
            /* The checkpoint is the state so far: real bytes, not zeros. */
            memset(buf, (int)(row & 0xff), o.checkpoint);
            memcpy(buf, &x, sizeof x);
            failed = write_all(fd, buf, o.checkpoint) || fdatasync(fd);
            io_ns += mono_ns() - t0;
            checkpoints++;
        }
    }
    wl_end(&m);
    int err = errno;
    close(fd);
    free(buf);
    if (failed)
        return probe_fail(ctx, EXIT_FAIL, "checkpoint write to %s failed: %s", o.dir, strerror(err));
    wl_note_ran(ctx);
    double wall_s = (double)(m.t1 - m.t0) / 1e9;
    json_obj_begin(result);
    wl_emit_head(result, &o, "wall_s", "s", wall_s, false);
    json_kv_u64(result, "rows", o.iters);
    json_kv_u64(result, "checkpoints", checkpoints);
    json_kv_u64(result, "checkpoint_bytes", o.checkpoint);
    json_kv_u64(result, "io_ns", io_ns);
    json_kv_f64(result, "io_fraction", (double)io_ns / (double)(m.t1 - m.t0));
    json_kv_str(result, "filesystem", fs_name(o.dir));
    json_kv_f64(result, "checksum", x);
    wl_emit(result, &m);
    json_obj_end(result);
    return EXIT_OK;
}
