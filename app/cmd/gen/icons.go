//go:build !js

package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
)

// The icon: a brass porthole with eight rivets and blue glass on a dark square. Everything
// sits inside the central 80 % circle, the safe zone of a maskable icon.
var (
	iconBG    = color.NRGBA{0x0f, 0x13, 0x18, 0xff}
	iconBrass = color.NRGBA{0xd9, 0xa4, 0x41, 0xff}
	iconRivet = color.NRGBA{0x8a, 0x62, 0x1c, 0xff}
	iconGlass = color.NRGBA{0x2f, 0x6f, 0xd6, 0xff}
	iconShine = color.NRGBA{0x9c, 0xc3, 0xff, 0xff}
)

// Shape radii and positions as fractions of the icon's size, centred at 0.5.
const (
	ringOuter  = 0.38
	ringInner  = 0.27
	rivetOrbit = 0.325
	rivetR     = 0.022
	shineR     = 0.07
	shineX     = 0.42
	shineY     = 0.40
)

// iconColor returns the colour at (x, y) in icon coordinates [0,1]².
func iconColor(x, y float64) color.NRGBA {
	dx, dy := x-0.5, y-0.5
	d := math.Hypot(dx, dy)
	switch {
	case d > ringOuter:
		return iconBG
	case d > ringInner:
		for i := 0; i < 8; i++ {
			a := float64(i) * math.Pi / 4
			if math.Hypot(dx-rivetOrbit*math.Cos(a), dy-rivetOrbit*math.Sin(a)) < rivetR {
				return iconRivet
			}
		}
		return iconBrass
	case math.Hypot(x-shineX, y-shineY) < shineR:
		return iconShine
	default:
		return iconGlass
	}
}

// renderIcon draws the icon at size×size with 4×4 supersampling.
func renderIcon(size int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	const ss = 4
	for py := 0; py < size; py++ {
		for px := 0; px < size; px++ {
			var r, g, b int
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					c := iconColor((float64(px)+(float64(sx)+0.5)/ss)/float64(size), (float64(py)+(float64(sy)+0.5)/ss)/float64(size))
					r, g, b = r+int(c.R), g+int(c.G), b+int(c.B)
				}
			}
			n := ss * ss
			img.SetNRGBA(px, py, color.NRGBA{uint8(r / n), uint8(g / n), uint8(b / n), 0xff})
		}
	}
	return img
}

// iconSVG is the same icon as a vector, for the favicon.
func iconSVG() string {
	hex := func(c color.NRGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
	var rivets bytes.Buffer
	for i := 0; i < 8; i++ {
		a := float64(i) * math.Pi / 4
		fmt.Fprintf(&rivets, `<circle cx="%.2f" cy="%.2f" r="%.2f" fill="%s"/>`,
			100*(0.5+rivetOrbit*math.Cos(a)), 100*(0.5+rivetOrbit*math.Sin(a)), 100*rivetR, hex(iconRivet))
	}
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100">`+
		`<rect width="100" height="100" rx="18" fill="%s"/>`+
		`<circle cx="50" cy="50" r="%.1f" fill="%s"/>%s`+
		`<circle cx="50" cy="50" r="%.1f" fill="%s"/>`+
		`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/></svg>`+"\n",
		hex(iconBG), 100*ringOuter, hex(iconBrass), rivets.String(),
		100*ringInner, hex(iconGlass), 100*shineX, 100*shineY, 100*shineR, hex(iconShine))
}

// writeIcons writes icon-192.png, icon-512.png and icon.svg into dir.
func writeIcons(dir string) error {
	for _, size := range []int{192, 512} {
		var buf bytes.Buffer
		if err := png.Encode(&buf, renderIcon(size)); err != nil {
			return fmt.Errorf("encode icon %d: %w", size, err)
		}
		name := filepath.Join(dir, fmt.Sprintf("icon-%d.png", size))
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write icon: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "icon.svg"), []byte(iconSVG()), 0o644); err != nil {
		return fmt.Errorf("write icon: %w", err)
	}
	return nil
}
