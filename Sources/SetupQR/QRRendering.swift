// A QR matrix drawn for a screen: as SVG for the web view, and as text for a terminal, two
// rows of modules to a line in Unicode half blocks (what Homebridge prints at its start).

extension QRMatrix {
    /// The code as an SVG document: a white square of `size + 2 × quietZone` units (the quiet
    /// zone a reader needs around the code, 4 modules by the standard) and one black `<path>`
    /// of the dark modules, a `M x y h n v 1 h -n z` run per row of dark modules. Nothing but
    /// numbers comes from the text, and there is no script: it is safe as an `<img>`.
    public func svg(quietZone: Int = 4, pixelsPerModule: Int = 8) -> String {
        let side = size + 2 * quietZone
        var path = ""
        for y in 0..<size {
            var x = 0
            while x < size {
                guard self[x, y] else {
                    x += 1
                    continue
                }
                var run = 1
                while self[x + run, y] { run += 1 }
                path += "M\(x + quietZone) \(y + quietZone)h\(run)v1h-\(run)z"
                x += run
            }
        }
        let pixels = side * pixelsPerModule
        return """
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(side) \(side)" width="\(pixels)" \
            height="\(pixels)" shape-rendering="crispEdges"><rect width="\(side)" height="\(side)" fill="#fff"/>\
            <path fill="#000" d="\(path)"/></svg>

            """
    }

    /// How a terminal is to draw the code.
    public enum TerminalColors: Sendable {
        /// Black modules on a white background set by ANSI colours (SGR 30;107) on each line:
        /// right on dark and light terminals alike. For a terminal (isatty).
        case ansi
        /// No escape sequences: the light modules and the quiet zone drawn in the terminal's
        /// text colour, the dark ones left as its background, as Homebridge's qrcode-terminal
        /// does. Right on a dark terminal (light text), the usual case, and in a log or a pipe,
        /// where escape sequences would be noise; inverted on a light one, which many readers
        /// (the iPhone's camera among them) still read.
        case plain
    }

    /// The code as lines of text, two rows of modules per line with `▀`, `▄`, `█` and spaces,
    /// inside a quiet zone of `quietZone` modules (2 by default, as `qrencode -t UTF8` draws:
    /// a terminal's lines are twice as tall as wide, and a reader finds the code with that).
    /// Every line ends in a newline.
    public func terminalText(_ colors: TerminalColors, quietZone: Int = 2) -> String {
        let side = size + 2 * quietZone
        // What a character draws: with ANSI colours, the dark modules (in black on white);
        // plain, the light ones (in the terminal's text colour).
        let drawn: (Int, Int) -> Bool = { x, y in
            let dark = self[x - quietZone, y - quietZone]
            return colors == .ansi ? dark : !dark
        }
        var text = ""
        var y = 0
        while y < side {
            if colors == .ansi { text += "\u{1B}[30;107m" }
            for x in 0..<side {
                // A last odd row is drawn with a quiet row under it.
                let top = drawn(x, y)
                let bottom = y + 1 < side ? drawn(x, y + 1) : (colors == .plain)
                switch (top, bottom) {
                case (true, true): text += "█"
                case (true, false): text += "▀"
                case (false, true): text += "▄"
                case (false, false): text += " "
                }
            }
            if colors == .ansi { text += "\u{1B}[0m" }
            text += "\n"
            y += 2
        }
        return text
    }
}
