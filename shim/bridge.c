/* bridge.c -- what the shim offers lockstep's profiler plugin in the same process (shim.h). */
#include "shim.h"

static const struct ls_bridge the_bridge = {
    .version = LS_BRIDGE_VERSION,
    .size = sizeof(struct ls_bridge),
    .active = ls_active,
};

/* Exported (exports.map): the plugin finds it with dlsym(RTLD_DEFAULT). Never fails. */
const struct ls_bridge *lockstep_shim_bridge(void);
const struct ls_bridge *lockstep_shim_bridge(void)
{
    return &the_bridge;
}
