import { defineConfig } from "vite";

// Built into web/dist (or --outDir) and embedded into the dsh binary by
// CMake (cmake/embed_web.py). Everything is local: no CDN, no web fonts.
export default defineConfig({
  root: __dirname,
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    target: "es2020",
  },
});
