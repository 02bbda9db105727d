"""Shared dashboard code, one module per concern; pages use it as ``from pages import common``.

- :mod:`.page_guard`: the page guard (a short ``st.error``, the traceback in the server log);
- :mod:`.loading`: cached loading of checkpoints, reports, explanations, depth analytics, lens and patching;
- :mod:`.sidebar`: the model picker (bundled, uploaded, typed) and the page's selection;
- :mod:`.sharing`: the view in the URL, the "copy link" box, the HTML report button;
- :mod:`.inputs`: the image input (upload, browsed test input, example), a patching source, and the checkpoints a
  page may compare;
- :mod:`.display`: display tables shown whole, a LastLayer head's post-hoc block ablation (an own classifier's unit profile), the maps' section,
  scrolling to an anchor.
- :mod:`.network`: an attached network explained by its units (unit profile, lens, Grad-CAM) and its stored report.
- :mod:`.switches`: page switches kept in the link and across page changes (``switches.pick(st.radio, ...)``).
- :mod:`.upstream`: a workaround for a Streamlit bug (a rerun dropped the reply a file upload waits for).
- :mod:`.own_route`: each page file answers its own url path, a server's first run included (``own_route()``,
  every page's first statement, and ``run_page``, ``app.py``'s).

Every page runs inside :func:`guard` (``app.py`` wraps ``page.run()``), so a new page gets it for
free; a script run on its own can use ``with common.guard(): ...`` (one line). A page adopts links
and reports with one line each: ``common.share(mode=mode)`` (its state into the URL; widgets take
their first value from ``common.opened_link()``), ``common.copy_link()`` and
``common.report_button(title, [(heading, figure_or_table), ...], file_stem)``.
"""

from pages.common.display import block_ablation_chart, maps_section, scroll_to, table
from pages.common.inputs import (
    BROWSED,
    CURRENT_INPUT,
    IMAGE_TYPES,
    PATCH_SOURCE,
    browsed_input,
    group_members,
    image_input,
    source_input,
)
from pages.common.loading import (
    ALLOW_NONFINITE,
    MAX_FAILURES,
    anyway,
    catalog,
    class_maps,
    configure_torch,
    depth_figures,
    depth_of_input,
    evaluate_locally,
    explain,
    faithfulness_verdict,
    load_depth,
    load_exits,
    load_lens,
    load_model,
    load_report,
    load_sample,
    network,
    patch,
    patch_units,
    seed_summary_of,
)
from pages.common.page_guard import LOG, guard
from pages.common.sharing import OPENED, VIEW, copy_link, opened_link, option_index, report_button, share, view_link
from pages.common.sidebar import (
    ANYWAY_LABEL,
    NO_MODELS,
    SELECTION,
    SOURCES,
    Selection,
    anyway_box,
    current,
    models_root,
    pick_model,
    provenance,
    selected,
    session_alive,
    session_id,
    show_load_warnings,
    upload_digest,
)
from pages.common.upstream import keep_replies_across_reruns

__all__ = [
    "ALLOW_NONFINITE",
    "ANYWAY_LABEL",
    "BROWSED",
    "CURRENT_INPUT",
    "IMAGE_TYPES",
    "LOG",
    "MAX_FAILURES",
    "NO_MODELS",
    "OPENED",
    "PATCH_SOURCE",
    "SELECTION",
    "SOURCES",
    "Selection",
    "VIEW",
    "anyway",
    "anyway_box",
    "block_ablation_chart",
    "browsed_input",
    "catalog",
    "class_maps",
    "configure_torch",
    "copy_link",
    "current",
    "depth_figures",
    "depth_of_input",
    "evaluate_locally",
    "explain",
    "faithfulness_verdict",
    "group_members",
    "guard",
    "image_input",
    "keep_replies_across_reruns",
    "load_depth",
    "load_exits",
    "load_lens",
    "load_model",
    "load_report",
    "load_sample",
    "maps_section",
    "models_root",
    "network",
    "opened_link",
    "option_index",
    "patch",
    "patch_units",
    "pick_model",
    "provenance",
    "report_button",
    "scroll_to",
    "seed_summary_of",
    "selected",
    "session_alive",
    "session_id",
    "share",
    "show_load_warnings",
    "source_input",
    "table",
    "upload_digest",
    "view_link",
]
