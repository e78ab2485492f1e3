// Run All of every notebook in a real JupyterLab, in headless Chromium, and report what a person
// would see: every cell's error output, and whether the notebook meant it (cells tagged
// raises-exception). `make lab-check` runs it against a copy of notebooks/ served on 127.0.0.1,
// so nothing the browser saves can touch the committed notebooks.
//
// usage: node scripts/lab_check.mjs URL TOKEN DIR SHOTS [NOTEBOOK...]
//   URL: the lab's base URL; TOKEN: its token; DIR: the served copy (to read the tags);
//   SHOTS: where the screenshots go. Exit 1 if any notebook shows an error it did not mean.
import { readFileSync, readdirSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

// playwright-core is installed into the project's ignored .node/ folder (NODE_DIR).
const require = createRequire(resolve(process.env.NODE_DIR ?? ".node", "node_modules", "_resolver.js"));
const { chromium } = require("playwright-core");

const [base, token, dir, shots, ...only] = process.argv.slice(2);
const notebooks = only.length ? only : readdirSync(dir).filter((f) => /^\d\d_.*\.ipynb$/.test(f)).sort();
const RUN_LIMIT_MS = 12 * 60 * 1000; // the slowest notebook (07) takes a few minutes
const PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"; // the notebook on screen
mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=127.0.0.1"],
});
let unintended = 0;
try {
  for (const name of notebooks) {
    const cells = JSON.parse(readFileSync(join(dir, name), "utf8")).cells;
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    // A workspace of its own, reset: only this notebook open.
    const workspace = name.replace(/\W/g, "-");
    await page.goto(`${base}/lab/workspaces/${workspace}/tree/${name}?reset&token=${token}`);
    await page.waitForSelector(`${PANEL} .jp-Cell`, { timeout: 60000 });
    await page.waitForSelector(".jp-Notebook-ExecutionIndicator[data-status='idle']", { timeout: 60000 })
      .catch(() => {});
    // A first open asks which kernel: the notebook's own.
    const select = page.locator(".jp-Dialog button", { hasText: "Select" });
    if (await select.count().catch(() => 0) || await select.waitFor({ timeout: 5000 }).then(() => true, () => false)) {
      await select.click();
    }
    const started = Date.now();
    // A fresh kernel, as a newcomer's Run All would have: Restart Kernel and Run All Cells.
    await page.click(".lm-MenuBar-itemLabel:text-is('Kernel')", { timeout: 10000 });
    await page.click(".lm-Menu-itemLabel:has-text('Restart Kernel and Run All Cells')", { timeout: 10000 });
    await page.click(".jp-Dialog .jp-mod-accept", { timeout: 10000 });
    // Finished: at least one cell ran, and for 3 s no cell waits or runs ("[*]").
    // (a cell whose source is hidden shows no prompt: a solution)
    const code = cells.filter((c) => c.cell_type === "code" && !c.metadata?.jupyter?.source_hidden).length;
    // The saved prompts already hold numbers: first wait for the run to start ("[*]" queued).
    await page.waitForFunction(
      (panel) => [...document.querySelectorAll(`${panel} .jp-CodeCell .jp-InputPrompt`)].some((p) => p.textContent.includes("*")),
      PANEL, { timeout: 60000 });
    let quiet = 0;
    let ran = 0;
    while (quiet < 3) {
      if (Date.now() - started > RUN_LIMIT_MS) throw new Error(`${name}: still running after ${RUN_LIMIT_MS / 1000} s`);
      await page.waitForTimeout(1000);
      const state = await page.evaluate((panel) => {
        const prompts = [...document.querySelectorAll(`${panel} .jp-CodeCell .jp-InputPrompt`)].map((p) => p.textContent);
        const kernel = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator, .jp-Notebook-ExecutionIndicator");
        const working = kernel ? kernel.getAttribute("data-status") !== "idle" : false;
        return { busy: working || prompts.some((t) => t.includes("*")), ran: prompts.filter((t) => /\[\d+\]/.test(t)).length };
      }, PANEL);
      ran = state.ran;
      quiet = state.busy ? 0 : quiet + 1;
    }
    if (ran < code) console.log(`${name}: STOPPED after ${ran} of ${code} code cells`);
    // What went to stderr in each cell: a traceback, or a warning or log line.
    const seen = await page.evaluate((panel) =>
      [...document.querySelectorAll(`${panel} .jp-Cell`)].map((cell) =>
        [...cell.querySelectorAll(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")]
          .map((o) => o.textContent.trim().split("\n").slice(-1)[0])), PANEL);
    const problems = [];
    seen.forEach((stderr, i) => {
      if (!stderr.length) return;
      const cell = cells[i] ?? {};
      const meant = (cell.metadata?.tags ?? []).includes("raises-exception");
      // stderr the committed notebook shows too (a warning it explains) is no surprise either
      const committed = (cell.outputs ?? []).some((o) => o.output_type === "error" || o.name === "stderr");
      const verdict = meant ? "intended error" : committed ? "expected stderr" : "UNINTENDED";
      console.log(`${name} cell ${i}: ${verdict}: ${stderr.join(" | ").slice(0, 160)}`);
      if (!meant && !committed) problems.push(i);
    });
    unintended += problems.length + (ran < code ? 1 : 0);
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    console.log(`${name}: ran all ${cells.length} cells in ${seconds} s; ${problems.length} unintended errors`);
    await page.screenshot({ path: join(shots, `${name.replace(".ipynb", "")}.png`) });
    // What a learner looks at: the first picture, and the first exercise with its verdict.
    const image = page.locator(`${PANEL} .jp-OutputArea-output img`).first();
    if (await image.count()) {
      await image.scrollIntoViewIfNeeded();
      await image.screenshot({ path: join(shots, `${name.replace(".ipynb", "")}-picture.png`) });
    }
    const verdict = page.locator(`${PANEL} .jp-Cell`, { hasText: "Not yet:" }).first();
    if (await verdict.count()) {
      await verdict.scrollIntoViewIfNeeded();
      await verdict.screenshot({ path: join(shots, `${name.replace(".ipynb", "")}-exercise.png`) });
    }
    await page.close();
  }
} finally {
  await browser.close();
}
process.exit(unintended ? 1 : 0);
