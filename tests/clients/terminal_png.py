"""Render a terminal capture (``tmux capture-pane -p -e``: text with SGR colour codes) to a PNG.

Each character is drawn in its cell of a monospace grid with the colours and weight the terminal
recorded (rich decodes the escape codes, Pillow draws). Used by tests/clients/test_nvim.py for the
Neovim README's screenshot.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from rich.ansi import AnsiDecoder
from rich.cells import cell_len
from rich.console import Console

FONT_NAMES = ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf")
FONT_DIRS = (
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/TTF"),
    Path("/usr/share/fonts/dejavu"),
)


def find_fonts() -> tuple[Path, Path] | None:
    """DejaVu Sans Mono (regular, bold): the system's, else the copy matplotlib ships."""
    dirs = list(FONT_DIRS)
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            dirs.append(Path(location) / "mpl-data" / "fonts" / "ttf")
    for folder in dirs:
        regular, bold = (folder / name for name in FONT_NAMES)
        if regular.is_file() and bold.is_file():
            return regular, bold
    return None


def render_png(
    ansi: str,
    out: Path,
    fonts: tuple[Path, Path],
    *,
    size: int = 15,
    background: tuple[int, int, int] = (20, 22, 27),
    foreground: tuple[int, int, int] = (224, 226, 234),
    pad: int = 12,
) -> tuple[int, int]:
    """Draw ``ansi`` (one terminal screen) into ``out``; returns the image's (width, height)."""
    from PIL import Image, ImageDraw, ImageFont

    regular = ImageFont.truetype(str(fonts[0]), size)
    bold = ImageFont.truetype(str(fonts[1]), size)
    cell_w = round(regular.getlength("M"))
    ascent, descent = regular.getmetrics()
    cell_h = ascent + descent + 2
    console = Console(width=1000, color_system="truecolor", legacy_windows=False)
    rows = list(AnsiDecoder().decode(ansi.rstrip("\n")))
    columns = max((row.cell_len for row in rows), default=1)
    width, height = columns * cell_w + 2 * pad, len(rows) * cell_h + 2 * pad
    image = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(image)

    def rgb(color: Any, default: tuple[int, int, int]) -> tuple[int, int, int]:
        if color is None or color.is_default:
            return default
        return tuple(color.get_truecolor())  # type: ignore[return-value]

    for y, row in enumerate(rows):
        x = 0
        for segment in row.render(console):
            style = segment.style
            fg = rgb(style.color if style else None, foreground)
            bg = rgb(style.bgcolor if style else None, background)
            if style is not None and style.reverse:
                fg, bg = bg, fg
            font = bold if style is not None and style.bold else regular
            for char in segment.text:
                cells = cell_len(char)
                if cells == 0:
                    continue
                left, top = pad + x * cell_w, pad + y * cell_h
                if bg != background:
                    draw.rectangle(
                        (left, top, left + cells * cell_w - 1, top + cell_h - 1), fill=bg
                    )
                if not char.isspace():
                    draw.text((left, top + 1), char, font=font, fill=fg)
                if style is not None and style.underline:
                    draw.line(
                        (left, top + ascent + 2, left + cells * cell_w - 1, top + ascent + 2),
                        fill=fg,
                    )
                x += cells
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, "PNG", optimize=True)
    return width, height
