/* Card backends that need a vendor runtime (XRT, CUDA) live in shared objects opened at run
 * time, so that the daemon and the tools run on hosts without that runtime: a missing or
 * broken plugin is a reason to log, never a failure to start. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_internal.h"

#ifndef FPGALZ4FS_PLUGIN_DIR
#define FPGALZ4FS_PLUGIN_DIR "/usr/lib/fpgalz4fs"
#endif

/* The directory of the running program, for plugins built next to it in a build tree. */
static int eng_plugin_exe_dir(char *dir, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    if (n <= 0)
        return -1;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

static void *eng_plugin_try(const char *dir, const char *name, char *err, size_t err_cap)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/fpgalz4fs-%s.so", dir, name) >= (int)sizeof(path))
        return NULL;
    if (access(path, F_OK) != 0)
        return NULL;
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        snprintf(err, err_cap, "%s", dlerror());
    return dl;
}

static void *eng_plugin_find(const char *name, char *err, size_t err_cap)
{
    const char *env = getenv("FPGALZ4FS_PLUGIN_DIR");
    if (env && *env) {
        void *dl = eng_plugin_try(env, name, err, err_cap);
        if (!dl && !err[0])
            snprintf(err, err_cap, "no fpgalz4fs-%s.so in %s (FPGALZ4FS_PLUGIN_DIR)", name, env);
        return dl;
    }
    char dir[PATH_MAX];
    void *dl = NULL;
    if (eng_plugin_exe_dir(dir, sizeof(dir)) == 0)
        dl = eng_plugin_try(dir, name, err, err_cap);
    if (!dl && !err[0])
        dl = eng_plugin_try(FPGALZ4FS_PLUGIN_DIR, name, err, err_cap);
    if (!dl && !err[0])
        snprintf(err, err_cap, "the %s backend is not installed (no fpgalz4fs-%s.so in %s)",
                 name, name, FPGALZ4FS_PLUGIN_DIR);
    return dl;
}

int eng_plugin_load(const char *name, eng_plugin_handle *h, char *err, size_t err_cap)
{
    memset(h, 0, sizeof(*h));
    err[0] = '\0';
    h->dl = eng_plugin_find(name, err, err_cap);
    if (!h->dl)
        return -ENOENT;
    const eng_plugin *p = dlsym(h->dl, ENG_PLUGIN_SYMBOL);
    if (!p)
        snprintf(err, err_cap, "fpgalz4fs-%s.so is not a backend plugin (no %s)", name,
                 ENG_PLUGIN_SYMBOL);
    else if (p->abi != ENG_PLUGIN_ABI || p->config_size != sizeof(eng_config) || !p->ops ||
             !p->probe || !p->name || strcmp(p->name, name) != 0)
        snprintf(err, err_cap, "fpgalz4fs-%s.so was built for another version of fpgalz4fs "
                 "(plugin ABI %u, expected %u)", name, p->abi, ENG_PLUGIN_ABI);
    else {
        h->plugin = p;
        return 0;
    }
    eng_plugin_unload(h);
    return -EINVAL;
}

void eng_plugin_unload(eng_plugin_handle *h)
{
    if (h->dl)
        dlclose(h->dl);
    memset(h, 0, sizeof(*h));
}
