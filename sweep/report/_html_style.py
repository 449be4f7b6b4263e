"""The HTML report's stylesheet (inline: the report is one file that works offline)."""

CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d8dee4; --soft:#f6f8fa; --ok:#1a7f37; --bad:#cf222e;
        --warn:#9a6700; --best:#dafbe1; --accent:#0969da; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
       color:var(--fg); background:#fff; }
main { max-width:1320px; margin:0 auto; padding:28px 28px 60px; }
header h1 { font-size:24px; margin:0 0 4px; }
header .sub { color:var(--muted); margin:0 0 14px; }
h2 { font-size:19px; margin:34px 0 6px; padding-bottom:6px; border-bottom:1px solid var(--line); }
h3 { font-size:15px; margin:20px 0 8px; }
.pill { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600;
        background:var(--soft); border:1px solid var(--line); color:var(--muted); margin-right:4px; }
.pill.sim { background:#fff8c5; border-color:#e3c75b; color:#6b5200; }
.pill.ok { color:var(--ok); } .pill.failed { color:var(--bad); } .pill.interrupted, .pill.pruned { color:var(--warn); }
.cards { display:grid; grid-template-columns:repeat(auto-fill,minmax(270px,1fr)); gap:12px; margin:14px 0 4px; }
.card { border:1px solid var(--line); border-radius:8px; padding:12px 14px; background:#fff; }
.card .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.card .v { font-size:22px; font-weight:650; font-variant-numeric:tabular-nums; }
.card .d { color:var(--muted); font-size:12.5px; overflow-wrap:anywhere; }
.group-meta { color:var(--muted); margin:0 0 10px; }
.group-meta b { color:var(--fg); font-weight:600; }
.best { margin:8px 0 12px; padding:10px 14px; border-left:4px solid var(--ok); background:#f3fbf5; border-radius:4px; }
.note { margin:8px 0 12px; padding:8px 12px; border-left:4px solid #d4a72c; background:#fff8e6; border-radius:4px; }
.tablewrap { overflow-x:auto; border:1px solid var(--line); border-radius:8px; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { padding:5px 8px; border-bottom:1px solid var(--line); text-align:left; white-space:nowrap; }
th { background:var(--soft); font-weight:600; font-size:12px; color:#424a53; position:sticky; top:0;
     white-space:normal; vertical-align:bottom; min-width:4.5em; }
table.ranking td.name { white-space:normal; overflow-wrap:anywhere; min-width:12em; max-width:19em; }
table.ranking td.status { white-space:normal; min-width:6em; max-width:11em; }
table.schedule td.names { white-space:normal; min-width:9em; max-width:17em; }
table.schedule td.names .nm { white-space:nowrap; }
table.ranking td.n, table.ranking th.n { padding:5px 6px; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; }
tbody tr:last-child td { border-bottom:none; }
tbody tr:nth-child(even) td { background:#fbfcfd; }
tr.best td { background:var(--best) !important; font-weight:600; }
tr.failed td { color:var(--bad); } tr.interrupted td, tr.pruned td { color:var(--warn); }
tr.infeasible td { color:var(--muted); }
td .ci { display:block; color:var(--muted); font-weight:400; font-size:11px; }
.charts { display:flex; flex-wrap:wrap; gap:12px; margin:12px 0; }
figure { margin:0; border:1px solid var(--line); border-radius:8px; padding:8px 8px 4px; background:#fff;
         flex:1 1 360px; max-width:calc((100% - 24px) / 3); }
figure.wide { flex-basis:100%; max-width:none; }
figcaption { color:var(--muted); font-size:12px; padding:2px 4px 4px; }
figcaption .legend { margin:0 0 4px; color:var(--fg); }
figure.wide figcaption { max-width:none; }
svg { display:block; width:100%; height:auto; font-family:inherit; }
svg .t { font-size:13px; font-weight:600; fill:#24292f; }
svg .k { font-size:10.5px; fill:#57606a; } svg .l { font-size:11px; fill:#57606a; }
svg .b { font-size:11.5px; fill:#24292f; } svg .v { font-size:11px; fill:#24292f; font-weight:600; }
svg .n { font-size:11px; fill:#cf222e; font-style:italic; } svg .rl { font-size:10.5px; fill:#57606a; }
svg .pl { font-size:10px; fill:#24292f; paint-order:stroke; stroke:#fff; stroke-width:3px; }
svg .g { stroke:#eaeef2; stroke-width:1; } svg .a { stroke:#8c959f; stroke-width:1; }
svg .ref { stroke:#8a8f98; stroke-width:1.2; stroke-dasharray:6 4; }
.legend { display:flex; flex-wrap:wrap; gap:6px 14px; margin:8px 0 2px; font-size:12.5px; }
.legend span { display:inline-flex; align-items:center; gap:6px; }
.legend i { width:12px; height:12px; border-radius:3px; display:inline-block; }
details { margin:6px 0; } summary { cursor:pointer; color:var(--accent); }
pre { background:var(--soft); border:1px solid var(--line); border-radius:6px; padding:8px 10px;
      font-size:12px; white-space:pre-wrap; overflow-wrap:anywhere; max-height:260px; overflow:auto; }
.muted { color:var(--muted); }
footer { margin-top:40px; color:var(--muted); font-size:12.5px; border-top:1px solid var(--line); padding-top:12px; }
footer dt { font-weight:600; color:var(--fg); margin-top:6px; } footer dd { margin:0 0 0 0; }
"""
