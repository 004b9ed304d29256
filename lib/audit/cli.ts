/** Placeholder until the audit command lands. */
export function runAuditCommand(_args: string[]): Promise<number> {
  console.error("svcd audit: not implemented yet");
  return Promise.resolve(2);
}
