package limits

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// CheckConfig refuses an HCL configuration file (playbook, inventory,
// variables file) beyond MaxFileSize, MaxNesting or MaxOperators, before
// it is parsed. start is where src begins in the file.
func CheckConfig(src []byte, filename string, start hcl.Pos) hcl.Diagnostics {
	if d := CheckSize(len(src), MaxFileSize, filename, start); d != nil {
		return d
	}
	toks, _ := hclsyntax.LexConfig(src, filename, start)
	return checkTokens(toks, true)
}

// CheckExpression is CheckConfig for one expression (a -var value): at
// most max bytes.
func CheckExpression(src []byte, filename string, start hcl.Pos, max int) hcl.Diagnostics {
	if d := CheckSize(len(src), max, filename, start); d != nil {
		return d
	}
	toks, _ := hclsyntax.LexExpression(src, filename, start)
	return checkTokens(toks, false)
}

// CheckTemplate is CheckConfig for a template file (templatefile).
func CheckTemplate(src []byte, filename string, start hcl.Pos) hcl.Diagnostics {
	if d := CheckSize(len(src), MaxFileSize, filename, start); d != nil {
		return d
	}
	toks, _ := hclsyntax.LexTemplate(src, filename, start)
	return checkTokens(toks, false)
}

// frame is one open bracket, brace, parenthesis, quote, heredoc or
// template sequence, or the file itself.
type frame struct {
	// nest counts the conditionals and unary operators open in the
	// expression being read here: the parser recurses for each.
	nest int
	// ops counts the operators of that expression: evaluation recurses
	// for each.
	ops int
	// directives counts the %{if} and %{for} open in this template.
	directives int
	// newlines says a line end ends an expression here (a body, an
	// object), as it does not inside brackets and parentheses.
	newlines bool
}

// scanner follows the lexer's tokens, keeping the nesting the parser will
// recurse through.
type scanner struct {
	frames []frame
	depth  int
}

func checkTokens(toks hclsyntax.Tokens, body bool) hcl.Diagnostics {
	s := &scanner{frames: []frame{{newlines: body}}}
	for i := range toks {
		prev, next := hclsyntax.Token{}, hclsyntax.Token{}
		if i > 0 {
			prev = toks[i-1]
		}
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		if d := s.step(toks[i], prev, next); d != nil {
			return d
		}
	}
	return nil
}

func (s *scanner) top() *frame { return &s.frames[len(s.frames)-1] }

func (s *scanner) step(tok, prev, next hclsyntax.Token) hcl.Diagnostics {
	switch tok.Type {
	case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
		hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
		if tok.Type == hclsyntax.TokenOBrack && endsTerm(prev) {
			s.top().ops++ // an index
		}
		if tok.Type == hclsyntax.TokenTemplateControl && next.Type == hclsyntax.TokenIdent {
			s.directive(string(next.Bytes))
		}
		s.frames = append(s.frames, frame{newlines: tok.Type == hclsyntax.TokenOBrace})
		s.depth++
	case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
		hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
		if len(s.frames) > 1 {
			f := s.top()
			s.depth -= 1 + f.nest + f.directives
			s.frames = s.frames[:len(s.frames)-1]
		}
	case hclsyntax.TokenComma:
		s.endExpression()
	case hclsyntax.TokenNewline, hclsyntax.TokenComment:
		// A line comment ends its line, as the parser reads it.
		isLineEnd := tok.Type == hclsyntax.TokenNewline || bytes.HasSuffix(tok.Bytes, []byte("\n"))
		if isLineEnd && s.top().newlines {
			s.endExpression()
		}
	case hclsyntax.TokenQuestion, hclsyntax.TokenBang:
		s.top().nest++
		s.top().ops++
		s.depth++
	case hclsyntax.TokenMinus:
		s.top().ops++
		if !endsTerm(prev) {
			s.top().nest++ // a negation
			s.depth++
		}
	case hclsyntax.TokenPlus, hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
		hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
		hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr,
		hclsyntax.TokenDot, hclsyntax.TokenEllipsis:
		s.top().ops++
	}
	return s.check(tok)
}

// directive follows %{if} and %{for}, which the template parser nests.
func (s *scanner) directive(keyword string) {
	t := s.top()
	switch keyword {
	case "if", "for":
		t.directives++
		s.depth++
	case "endif", "endfor":
		if t.directives > 0 {
			t.directives--
			s.depth--
		}
	}
}

func (s *scanner) endExpression() {
	f := s.top()
	s.depth -= f.nest
	f.nest, f.ops = 0, 0
}

func (s *scanner) check(tok hclsyntax.Token) hcl.Diagnostics {
	switch {
	case s.depth > MaxNesting:
		return refuse(tok, "Input nested too deeply", fmt.Sprintf(
			"Brackets, braces, parentheses, strings, templates, conditionals or unary operators nest more than %d deep here; wsu refuses deeper input before parsing it. %s",
			MaxNesting, docRef))
	case s.top().ops > MaxOperators:
		return refuse(tok, "Expression too long", fmt.Sprintf(
			"This expression chains more than %d operators; wsu refuses longer ones before parsing them. Split it, e.g. into locals. %s",
			MaxOperators, docRef))
	}
	return nil
}

func refuse(tok hclsyntax.Token, summary, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: tok.Range.Ptr()}}
}

// endsTerm says a token ends an operand, so a following minus subtracts
// and a following bracket indexes.
func endsTerm(t hclsyntax.Token) bool {
	switch t.Type {
	case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc,
		hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCBrace, hclsyntax.TokenStar:
		return true
	}
	return false
}
