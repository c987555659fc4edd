// Builds the dashboard into dist/ (embedded in tockd by package ui):
// esbuild bundles and minifies src/main.tsx with Preact; index.html and
// app.css are copied. The output depends only on the sources and the
// locked packages, so `make lint` can rebuild it and compare.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const out = process.argv[2] ?? "dist";
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/main.tsx"],
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022"],
  jsx: "automatic",
  jsxImportSource: "preact",
  outfile: out + "/app.js",
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("src/index.html", out + "/index.html");
copyFileSync("src/app.css", out + "/app.css");
