// markdown-it ships no types; the one call the conversation view makes.
declare module "markdown-it" {
  export default class MarkdownIt {
    constructor(options?: { html?: boolean; linkify?: boolean; breaks?: boolean });
    render(source: string): string;
  }
}
declare module "*.css";
