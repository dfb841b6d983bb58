// The agent as the Node end-to-end tests run it on a fake node: its config in <tmp>/agent.yaml,
// listening on a free port, its rings in `ringDir` (made here), the fake NVML's state file in
// FAKE_NVML_STATE. `sections` is the config: the plugin section adds to `pluginSection`'s, eBPF is
// off unless the test says otherwise.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { startAgent } from "../agent.mjs";
import { freePort } from "../prometheus.mjs";

// A fake node's places under a new temporary directory `tmp`: its sysfs tree `sys`, its rings
// `ringDir` (made by startFakeNodeAgent) and the fake NVML's state file `nvmlState`.
export function fakeNodeDirs(name) {
  const tmp = mkdtempSync(join(tmpdir(), `ncclscope-${name}-`));
  return { tmp, sys: join(tmp, "sys"), ringDir: join(tmp, "rings"), nvmlState: join(tmp, "nvml.state") };
}

// Writes `text` and a newline to the file `rel` of the sysfs tree `sys`, making its directories.
export const sysfsWriter = (sys) => (rel, text) => {
  mkdirSync(dirname(join(sys, rel)), { recursive: true });
  writeFileSync(join(sys, rel), `${text}\n`);
};

// Rings read every 50 ms with every kernel and proxy event recorded.
export const pluginSection = (ringDir) => ({ ring_dir: ringDir, poll_interval: "50ms", kernel_duty_cycle: 1, proxy_duty_cycle: 1 });

// Returns { agent (startAgent's process), port } (`port`: one chosen beforehand, else a free one).
export async function startFakeNodeAgent(agentBin, { tmp, ringDir, nvmlState, config, port: chosen }) {
  const port = chosen ?? await freePort();
  mkdirSync(ringDir);
  const agent = await startAgent(agentBin, {
    port,
    configPath: join(tmp, "agent.yaml"),
    config: { ebpf: { enabled: false }, ...config, plugin: { ...pluginSection(ringDir), ...config.plugin } },
    env: { ...process.env, FAKE_NVML_STATE: nvmlState },
  });
  return { agent, port };
}
